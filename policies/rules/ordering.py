"""Deploy order: one stack policy per rule of `azdl/review/deploy_order.py` (Azure's documented
deploy-time preconditions, checked on the resources' dependencies)."""

from pulumi_policy import EnforcementLevel, ReportViolation, Severity, StackValidationArgs

from azdl.review import deploy_order

from .pack import stack_policy


def _declare(rule: deploy_order.Rule) -> None:
    """CrossGuard hands a stack validation every resource with its dependencies, the graph
    Pulumi deploys by."""

    @stack_policy(
        name=rule.name,
        description=f"{rule.description} Source: {rule.docs[0]}",
        enforcement=EnforcementLevel.MANDATORY,
        severity=Severity.CRITICAL,
        remediation=rule.remediation,
    )
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        graph = deploy_order.graph_from_policy_resources(args.resources)
        for violation in rule.check(graph):
            report_violation(violation.message, violation.resource)


for _rule in deploy_order.RULES:
    _declare(_rule)
