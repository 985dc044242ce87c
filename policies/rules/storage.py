"""Storage accounts: TLS, anonymous and public network access, NFS reach, and, in prod,
deletion protection, zone redundancy and recoverable outputs; kept data outside the group
`pulumi destroy` deletes."""

from collections.abc import Iterator

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
)

from azdl.review import deploy_order
from infra.azure_facts import (
    BLOB_CONTAINER,
    BLOB_SERVICE_PROPERTIES,
    ML_WORKSPACE,
    RESOURCE_GROUP,
    STORAGE_ACCOUNT,
    UNKNOWN,
    lookup,
)

from .pack import is_prod, resource_policy, stack_policy

GOOD_TLS = ("TLS1_2", "TLS1_3")
DATA_ACCOUNT_KINDS = ("BlockBlobStorage", "FileStorage")  # premium accounts holding datasets
# Zone-redundant storage SKUs (learn.microsoft.com/azure/storage/common/storage-redundancy).
ZONE_REDUNDANT_SKUS = ("Standard_ZRS", "Standard_GZRS", "Standard_RAGZRS", "Premium_ZRS")


@resource_policy(
    name="storage-minimum-tls-1-2",
    description="Storage accounts accept only TLS 1.2 or later.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation="set minimum_tls_version='TLS1_2' on the storage account",
    applies_to=(STORAGE_ACCOUNT,),
)
def _storage_tls(args: ResourceValidationArgs) -> Iterator[str]:
    tls = lookup(args.props, "minimumTlsVersion")
    if tls is UNKNOWN or tls in GOOD_TLS:
        return
    shown = "not set (Azure then accepts TLS 1.0)" if tls is None else f"{tls}"
    yield f"storage account '{args.name}': minimumTlsVersion is {shown}; TLS 1.2 is required"


@resource_policy(
    name="storage-no-public-blob-access",
    description="No anonymous (public) blob access on accounts or containers.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "set allow_blob_public_access=False on the account and public_access='None' on containers"
    ),
    applies_to=(STORAGE_ACCOUNT, BLOB_CONTAINER),
)
def _public_blob_access(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type == STORAGE_ACCOUNT:
        allowed = lookup(args.props, "allowBlobPublicAccess")
        if allowed is not UNKNOWN and allowed is not False:
            yield (
                f"storage account '{args.name}': allowBlobPublicAccess is {allowed}; "
                "anonymous blob access must be off (false)"
            )
    else:
        access = lookup(args.props, "publicAccess")
        if access not in (None, "None", UNKNOWN):
            yield f"blob container '{args.name}': publicAccess is {access}; it must be None"


@resource_policy(
    name="storage-private-in-prod",
    description=(
        "Prod storage is reached only privately: data accounts disable public network access; "
        "the workspace's storage either does too or denies every public address in its firewall."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    remediation=(
        "use network.mode privateEndpoints in the prod stack (data accounts: "
        "public_network_access='Disabled'; the workspace's storage: firewall default_action "
        "'Deny' with no ip_rules or virtual_network_rules, or storage.workspaceStorage: private)"
    ),
    applies_to=(STORAGE_ACCOUNT,),
)
def _prod_public_network(args: ResourceValidationArgs) -> Iterator[str]:
    """Prod data accounts take no public network access. Other prod accounts (the workspace's
    storage) may instead keep it Enabled behind a firewall that admits nothing from the public
    network: default Deny, no IP and no VNet rules, so only private endpoints, trusted Azure
    services and resource-instance rules get in. That is Azure ML's generally available
    configuration for a private workspace's storage ("Secure Azure storage accounts",
    https://learn.microsoft.com/azure/machine-learning/how-to-secure-workspace-vnet)."""
    if not is_prod(args.props):
        return
    access = lookup(args.props, "publicNetworkAccess")
    if access in ("Disabled", UNKNOWN):
        return
    shown = access or "not set (Enabled)"
    if lookup(args.props, "kind") in DATA_ACCOUNT_KINDS:
        yield (
            f"storage account '{args.name}' (prod): publicNetworkAccess is {shown}; prod data "
            "accounts are reached only by private endpoints"
        )
        return
    rules = lookup(args.props, "networkRuleSet", default={})
    if rules is UNKNOWN:
        return
    default_action = lookup(rules, "defaultAction")
    ip_rules = lookup(rules, "ipRules", default=[])
    vnet_rules = lookup(rules, "virtualNetworkRules", default=[])
    if UNKNOWN in (default_action, ip_rules, vnet_rules):
        return
    admits = []
    if default_action != "Deny":
        admits.append(f"its firewall's defaultAction is {default_action or 'not set (Allow)'}")
    if len(ip_rules):
        admits.append("its firewall admits internet addresses (ipRules)")
    if len(vnet_rules):
        admits.append("its firewall admits VNets by service endpoint (virtualNetworkRules)")
    if admits:
        yield (
            f"storage account '{args.name}' (prod): publicNetworkAccess is {shown} and "
            + "; ".join(admits)
        )


@resource_policy(
    name="nfs-not-internet-reachable",
    description="NFS (FileStorage) accounts are reachable from the VNet only.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    remediation=(
        "give the NFS account network_rule_set default_action='Deny' with VNet rules only, or "
        "disable public network access"
    ),
    applies_to=(STORAGE_ACCOUNT,),
)
def _nfs_internet(args: ResourceValidationArgs) -> Iterator[str]:
    if lookup(args.props, "kind") != "FileStorage":
        return
    access = lookup(args.props, "publicNetworkAccess")
    default_action = lookup(args.props, "networkRuleSet", "defaultAction")
    ip_rules = lookup(args.props, "networkRuleSet", "ipRules", default=[])
    if UNKNOWN in (access, default_action, ip_rules) or access == "Disabled":
        return
    if default_action != "Deny":
        yield (
            f"NFS account '{args.name}': its firewall's defaultAction is "
            f"{default_action or 'not set (Allow)'}, so the internet can reach it"
        )
    elif len(ip_rules):
        yield f"NFS account '{args.name}': its firewall admits internet addresses (ipRules)"


@resource_policy(
    name="data-accounts-protected-in-prod",
    description="Prod data accounts (premium blob, NFS) are protected from deletion.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation="set storage.dataProtection: protect in the prod stack",
    applies_to=(STORAGE_ACCOUNT,),
)
def _prod_data_protected(args: ResourceValidationArgs) -> Iterator[str]:
    if not is_prod(args.props):
        return
    if lookup(args.props, "kind") in DATA_ACCOUNT_KINDS and not args.opts.protect:
        yield f"data account '{args.name}' (prod) is not protected: `pulumi destroy` can delete it"


@resource_policy(
    name="outputs-zone-redundant-in-prod",
    description="Prod general-purpose storage (checkpoints, logs) is zone-redundant.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation="set storage.outputsRedundancy: ZRS or GZRS (sku Standard_ZRS/Standard_GZRS)",
    applies_to=(STORAGE_ACCOUNT,),
)
def _prod_outputs_zone_redundant(args: ResourceValidationArgs) -> Iterator[str]:
    """Prod general-purpose accounts (the outputs account: checkpoints, logs) keep copies in
    three zones (storage-redundancy: ZRS, GZRS, RA-GZRS)."""
    if not is_prod(args.props):
        return
    if lookup(args.props, "kind") != "StorageV2":
        return
    sku = lookup(args.props, "sku", "name")
    if sku is UNKNOWN or sku in ZONE_REDUNDANT_SKUS:
        return
    yield (
        f"storage account '{args.name}' (prod): sku {sku or 'not set'} keeps all copies in one "
        "availability zone"
    )


@stack_policy(
    name="outputs-recoverable-in-prod",
    description=(
        "Prod general-purpose storage keeps deleted blobs, and versions or deleted containers."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation=(
        "add storage.BlobServiceProperties with delete_retention_policy and "
        "is_versioning_enabled or container_delete_retention_policy (infra/storage.py)"
    ),
)
def _prod_outputs_recoverable(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every prod general-purpose account (the outputs account) keeps deleted blobs (blob soft
    delete) and either versions or deleted containers (versioning or container soft delete):
    soft-delete-blob-overview, versioning-overview, soft-delete-container-overview."""
    graph = deploy_order.graph_from_policy_resources(args.resources)
    for node in graph.of_type(STORAGE_ACCOUNT):
        if not is_prod(node.props) or lookup(node.props, "kind") != "StorageV2":
            continue
        services = graph.dependents(node, BLOB_SERVICE_PROPERTIES)
        props = [s.props for s in services]
        if any(
            UNKNOWN
            in (
                lookup(p, "deleteRetentionPolicy", "enabled"),
                lookup(p, "isVersioningEnabled"),
                lookup(p, "containerDeleteRetentionPolicy", "enabled"),
            )
            for p in props
        ):
            continue  # fmt: skip
        recoverable = any(
            lookup(p, "deleteRetentionPolicy", "enabled") is True
            and (
                lookup(p, "isVersioningEnabled") is True
                or lookup(p, "containerDeleteRetentionPolicy", "enabled") is True
            )
            for p in props
        )
        if not recoverable:
            report_violation(
                f"{deploy_order.label(node)} (prod): no blob service properties with blob soft "
                "delete and versioning or container soft delete, so a deleted or overwritten "
                "checkpoint is gone",
                node.id,
            )


@stack_policy(
    name="kept-data-outlives-its-group",
    description=(
        "Storage accounts sit outside the workspace's resource group, and a protected account's "
        "group is protected too (deleting a group deletes its contents)."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "put storage accounts in the data resource group and give that group the strongest "
        "protection of what it holds (infra/program.py)"
    ),
)
def _kept_data_outlives_its_group(args: StackValidationArgs, report_violation: ReportViolation):
    """Deleting a resource group deletes everything in it, whatever Pulumi's protect or
    retainOnDelete says about a child (pulumi/pulumi-azure-native#2522). So storage accounts
    never share a group with the workspace (which `pulumi destroy` deletes with its group),
    and a protected account's group, where the stack declares it, is protected as well."""
    groups = {lookup(r.props, "resourceGroupName"): r for r in args.resources
              if r.resource_type == RESOURCE_GROUP}  # fmt: skip
    platform = {lookup(r.props, "resourceGroupName") for r in args.resources
                if r.resource_type == ML_WORKSPACE}  # fmt: skip
    for account in (r for r in args.resources if r.resource_type == STORAGE_ACCOUNT):
        group_name = lookup(account.props, "resourceGroupName")
        if not isinstance(group_name, str):
            continue
        if group_name in platform:
            report_violation(
                f"storage account '{account.name}' sits in resource group '{group_name}' with "
                "the workspace: destroying the platform deletes that group and the account in "
                "it, whatever protect or retainOnDelete say",
                account.urn,
            )
        group = groups.get(group_name)
        if account.opts.protect and group is not None and not group.opts.protect:
            report_violation(
                f"storage account '{account.name}' is protected but its resource group "
                f"'{group_name}' is not: deleting the group deletes the account",
                account.urn,
            )
