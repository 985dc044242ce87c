"""Resource logs: prod services send theirs to Log Analytics."""

from pulumi_policy import EnforcementLevel, ReportViolation, Severity, StackValidationArgs

from azdl.review import arm, deploy_order
from infra.azure_facts import DIAGNOSTIC_SETTING, KEY_VAULT, ML_WORKSPACE, STORAGE_ACCOUNT, lookup

from .pack import is_prod, stack_policy

# What each prod service must send to Log Analytics (infra/diagnostics.py has the categories),
# and the registry, whichever form declares it.
DIAGNOSED_TYPES = (KEY_VAULT, ML_WORKSPACE, STORAGE_ACCOUNT)


def _needs_diagnostics(node: deploy_order.Node) -> bool:
    diagnosed = node.type in DIAGNOSED_TYPES or arm.is_registry(node.type, node.props)
    if not diagnosed or not is_prod(node.props):
        return False
    # The NFS (FileStorage) account is a documented trade-off (docs/access.md).
    return node.type != STORAGE_ACCOUNT or lookup(node.props, "kind") != "FileStorage"


@stack_policy(
    name="diagnostic-settings-in-prod",
    description=(
        "Prod Key Vault, registry, ML workspace and blob storage send resource logs to Log "
        "Analytics."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation=(
        "add a monitor.DiagnosticSetting with workspace_id for the resource (storage: its "
        "blobServices/default); infra/diagnostics.py declares them"
    ),
)
def _prod_diagnostics(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every prod Key Vault, registry, ML workspace and blob storage account has a diagnostic
    setting (one that takes the resource, or its blob service, as its resourceUri) sending its
    logs to a Log Analytics workspace."""
    graph = deploy_order.graph_from_policy_resources(args.resources)
    for node in graph.nodes.values():
        if not _needs_diagnostics(node):
            continue
        settings = graph.dependents(node, DIAGNOSTIC_SETTING)
        if not any(lookup(s.props, "workspaceId") is not None for s in settings):
            report_violation(
                f"{deploy_order.label(node)} (prod) sends no resource logs to Log Analytics: no "
                "diagnostic setting with a workspaceId takes it",
                node.id,
            )
