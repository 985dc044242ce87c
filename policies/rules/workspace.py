"""The Azure ML workspace's own resources: datastores that need no data-plane role to create,
and workspace and Key Vault names that change with each deployment."""

from collections.abc import Iterator

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
)

from azdl.review import deploy_order
from infra.azure_facts import KEY_VAULT, ML_DATASTORE, ML_WORKSPACE, UNKNOWN, lookup

from .pack import resource_policy, stack_policy

# pulumi-random's RandomId, which draws the per-deployment id (infra/program.py).
RANDOM_ID = "random:index/randomId:RandomId"

# Resources Azure soft-deletes, keeping their names (workspace 14 days: concept-soft-delete,
# ms.date 2025-10-31; Key Vault 7-90 days: key-vault/general/soft-delete-overview).
SOFT_DELETED = {ML_WORKSPACE: "workspace", KEY_VAULT: "Key Vault"}


@resource_policy(
    name="datastores-skip-validation",
    description=(
        "Datastores are created with skipValidation, so deploying needs no data-plane role."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation="set skip_validation=True on the Datastore",
    applies_to=(ML_DATASTORE,),
)
def _datastore_skips_validation(args: ResourceValidationArgs) -> Iterator[str]:
    """Azure ML validates a datastore at creation by reaching its storage with the caller's
    credentials (the ARM spec's `skipValidation`: "Flag to skip validation", on the datastore
    PUT, machinelearningservices 2025-12-01); with identity-based access that asks the
    deploying identity for a data-plane role it need not have."""
    skip = lookup(args.props, "skipValidation")
    if skip is not True and skip is not UNKNOWN:
        yield (
            f"datastore '{args.name}': skipValidation is {'not set' if skip is None else skip}, "
            "so creating it needs the deploying identity to reach the storage's data plane"
        )


@stack_policy(
    name="soft-deleted-names-per-deployment",
    description=(
        "Workspace and Key Vault names derive from a per-deployment id that no protected "
        "resource depends on, so `up` after `destroy` never meets the soft-deleted ones."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "name them with the deployment id (infra/naming.py with_deployment) and keep the id out "
        "of protected resources' inputs (infra/program.py)"
    ),
)
def _soft_deleted_names_per_deployment(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    """A workspace or Key Vault name that `up` after `destroy` asks for again collides with the
    soft-deleted one for up to 14 (workspace) or 90 days (Key Vault). So their names derive from
    a RandomId, which `pulumi destroy` deletes and the next `up` draws anew, and no protected
    resource depends on that id: `pulumi destroy --exclude-protected` keeps what a protected
    resource depends on, and a kept id brings the old names back."""
    graph = deploy_order.graph_from_policy_resources(args.resources)
    ids = {n.id for n in graph.of_type(RANDOM_ID)}
    for node in graph.of_type(*SOFT_DELETED):
        if not ids & graph.before(node):
            report_violation(
                f"{SOFT_DELETED[node.type]} '{node.name}': its name does not change from one "
                "deployment to the next, so `pulumi up` after `pulumi destroy` asks for the "
                "name Azure keeps soft-deleted",
                node.id,
            )
    for res in args.resources:
        if res.opts.protect and res.urn in graph.nodes and ids & graph.before(graph.nodes[res.urn]):
            report_violation(
                f"'{res.name}' is protected and depends on the deployment id: `pulumi destroy "
                "--exclude-protected` keeps the id, and the next `up` asks for the soft-deleted "
                "names again",
                res.urn,
            )
