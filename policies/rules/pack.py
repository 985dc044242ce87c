"""What every rule module shares: the decorators that declare a policy beside its check, the
list they fill, and what "prod" is to a policy (the resource's own `environment` tag)."""

from collections.abc import Callable, Iterator
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from infra.azure_facts import lookup

POLICIES: list[Policy] = []  # every declared policy, in the order the rule modules declare them

ResourceCheck = Callable[[ResourceValidationArgs], Iterator[str]]
StackCheck = Callable[[StackValidationArgs, ReportViolation], None]
# Which resources a resource policy reads: type tokens, or a test of (type token, inputs).
AppliesTo = tuple[str, ...] | Callable[[str, Any], bool]


def is_prod(props: Any) -> bool:
    return lookup(props, "tags", "environment") == "prod"


def resource_policy(
    *,
    name: str,
    description: str,
    enforcement: EnforcementLevel,
    severity: Severity,
    remediation: str,
    applies_to: AppliesTo,
) -> Callable[[ResourceCheck], ResourceValidationPolicy]:
    """Declare the decorated check as a resource policy: it runs on the resources `applies_to`
    admits and yields messages, each reported with the remediation appended."""

    def declare(check: ResourceCheck) -> ResourceValidationPolicy:
        def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
            if isinstance(applies_to, tuple):
                if args.resource_type not in applies_to:
                    return
            elif not applies_to(args.resource_type, args.props):
                return
            for message in check(args):
                report_violation(f"{message}. Fix: {remediation}", None)

        policy = ResourceValidationPolicy(
            name=name,
            description=description,
            validate=validate,
            enforcement_level=enforcement,
            severity=severity,
            remediation_steps=remediation,
        )
        POLICIES.append(policy)
        return policy

    return declare


def stack_policy(
    *,
    name: str,
    description: str,
    enforcement: EnforcementLevel,
    severity: Severity,
    remediation: str,
    config_schema: PolicyConfigSchema | None = None,
) -> Callable[[StackCheck], StackValidationPolicy]:
    """Declare the decorated function as a stack policy: it sees every resource of the plan
    and reports its own violations."""

    def declare(validate: StackCheck) -> StackValidationPolicy:
        policy = StackValidationPolicy(
            name=name,
            description=description,
            validate=validate,
            enforcement_level=enforcement,
            config_schema=config_schema,
            severity=severity,
            remediation_steps=remediation,
        )
        POLICIES.append(policy)
        return policy

    return declare
