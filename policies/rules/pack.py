"""What every rule module shares: the decorators that declare a policy beside its check, the
list they fill, and how a check reads a resource's inputs."""

from collections.abc import Callable, Iterator, Mapping, Sequence
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
from pulumi_policy.proxy import UnknownValueError

STORAGE = "azure-native:storage:StorageAccount"
CONTAINER = "azure-native:storage:BlobContainer"
COMPUTE = "azure-native:machinelearningservices:Compute"
NSG = "azure-native:network:NetworkSecurityGroup"
NSG_RULE = "azure-native:network:SecurityRule"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
VM = "azure-native:compute:VirtualMachine"
NIC = "azure-native:network:NetworkInterface"
TASK_RUN = "azure-native:containerregistry:TaskRun"
DATASTORE = "azure-native:machinelearningservices:Datastore"
WORKSPACE = "azure-native:machinelearningservices:Workspace"
RESOURCE_GROUP = "azure-native:resources:ResourceGroup"
VAULT = "azure-native:keyvault:Vault"
RANDOM_ID = "random:index/randomId:RandomId"
DIAGNOSTIC_SETTING = "azure-native:monitor:DiagnosticSetting"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"

POLICIES: list[Policy] = []  # every declared policy, in the order the rule modules declare them

ResourceCheck = Callable[[ResourceValidationArgs], Iterator[str]]
StackCheck = Callable[[StackValidationArgs, ReportViolation], None]
# Which resources a resource policy reads: type tokens, or a test of (type token, inputs).
AppliesTo = tuple[str, ...] | Callable[[str, Any], bool]


class _Unknown:
    def __repr__(self) -> str:
        return "<unknown until deploy>"


UNKNOWN = _Unknown()


def get(props: Any, *path: str | int, default: Any = None) -> Any:
    """`props[path...]`, `default` where absent, UNKNOWN where not known until deploy."""
    value = props
    for step in path:
        container = Sequence if isinstance(step, int) else Mapping
        if not isinstance(value, container) or isinstance(value, str):
            return default
        try:
            value = value[step]
        except UnknownValueError:
            return UNKNOWN
        except (IndexError, KeyError):
            return default
    return value


def is_prod(props: Any) -> bool:
    return get(props, "tags", "environment") == "prod"


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
