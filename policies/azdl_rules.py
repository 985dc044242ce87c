"""azdl's guardrails as CrossGuard policies (pulumi-policy), usable two ways:

- by Pulumi: `pulumi preview --policy-pack policies` (`__main__.py` builds the PolicyPack);
- offline: `azdl policy STACK|MANIFEST` hands a plan manifest to the same `POLICIES`.

Every policy carries a severity and a one-line remediation. Checks read resource inputs as
Azure sees them (camelCase). "Prod" is the resource's own `environment` tag, so resource
policies need no stack context. A value unknown until deployment is skipped, never guessed
(the advisory `gpu-spend-known` names the clusters the budget check had to skip).
The GPU budget comes from the policy config `maxGpuSpendPerHourUsd` (the offline runner takes
it from the stack config; for `pulumi preview` see `azdl policy --pack-config`).
The deploy-order stack policies (Azure's documented deploy-time preconditions, checked on the
resources' dependencies) are the rules of `azdl/review/deploy_order.py`, one policy each.
"""

import ipaddress
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

import pulumi.runtime
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # Pulumi runs the pack with only this folder on the path
    sys.path.insert(0, str(REPO_ROOT))

from azdl.review import arm, deploy_order  # noqa: E402
from azdl.review.prices import load_prices  # noqa: E402
from infra.catalogue import VM_SIZES  # noqa: E402
from infra.deployer import ASSIGNABLE_PRINCIPAL_TYPES, ASSIGNABLE_ROLES  # noqa: E402

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
# Resources Azure soft-deletes, keeping their names (workspace 14 days: concept-soft-delete,
# ms.date 2025-10-31; Key Vault 7-90 days: key-vault/general/soft-delete-overview).
SOFT_DELETED = {WORKSPACE: "workspace", VAULT: "Key Vault"}
# Image resources that build on the machine running `pulumi up` (pulumi-docker-build,
# pulumi-docker).
LOCAL_IMAGE_BUILDS = ("docker-build:index:Image", "docker:index:Image")
DIAGNOSTIC_SETTING = "azure-native:monitor:DiagnosticSetting"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
# Zone-redundant storage SKUs (learn.microsoft.com/azure/storage/common/storage-redundancy).
ZONE_REDUNDANT_SKUS = ("Standard_ZRS", "Standard_GZRS", "Standard_RAGZRS", "Premium_ZRS")

REQUIRED_TAGS = ("environment", "project", "owner", "costCenter")
GOOD_TLS = ("TLS1_2", "TLS1_3")
DATA_ACCOUNT_KINDS = ("BlockBlobStorage", "FileStorage")  # premium accounts holding datasets
# Sources that may reach the training subnet inbound: Azure ML's control plane and in-VNet
# traffic. Service tags may carry a region suffix (AzureMachineLearning.westeurope).
INBOUND_SERVICE_TAGS = ("BatchNodeManagement", "AzureMachineLearning")
INBOUND_INTERNAL = ("VirtualNetwork", "AzureLoadBalancer")
# Outbound destinations Azure ML requires of compute in a customer VNet (service tags, without
# their region suffix), the "Required" table of its public internet access list, which
# how-to-secure-workspace-vnet and how-to-secure-training-vnet include (MicrosoftDocs/
# azure-ai-docs, includes/machine-learning-public-internet-access.md, ms.date 2025-02-10;
# tests/infra/documented_outbound.py transcribes it with the ports).
REQUIRED_OUTBOUND_TAGS = (
    "AzureActiveDirectory", "AzureMachineLearning", "BatchNodeManagement", "AzureResourceManager",
    "Storage", "AzureFrontDoor.FrontEnd", "MicrosoftContainerRegistry", "AzureFrontDoor.FirstParty",
)  # fmt: skip
# Built-in roles that can change resources or hand out access (fixed GUIDs in every tenant).
PRIVILEGED_ROLES = {
    "8e3af657-a8ff-404c-9d86-bca7d93b5e97": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c6a72089": "User Access Administrator",
    "f58310d9-a9f6-439a-9e8d-f62e7b41a168": "Role Based Access Control Administrator",
}


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


# ---- resource policies: each yields violation messages ------------------------------------


def _storage_tls(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type != STORAGE:
        return
    tls = get(args.props, "minimumTlsVersion")
    if tls is UNKNOWN or tls in GOOD_TLS:
        return
    shown = "not set (Azure then accepts TLS 1.0)" if tls is None else f"{tls}"
    yield f"storage account '{args.name}': minimumTlsVersion is {shown}; TLS 1.2 is required"


def _public_blob_access(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type == STORAGE:
        allowed = get(args.props, "allowBlobPublicAccess")
        if allowed is not UNKNOWN and allowed is not False:
            yield (
                f"storage account '{args.name}': allowBlobPublicAccess is {allowed}; "
                "anonymous blob access must be off (false)"
            )
    elif args.resource_type == CONTAINER:
        access = get(args.props, "publicAccess")
        if access not in (None, "None", UNKNOWN):
            yield f"blob container '{args.name}': publicAccess is {access}; it must be None"


def _prod_public_network(args: ResourceValidationArgs) -> Iterator[str]:
    """Prod data accounts take no public network access. Other prod accounts (the workspace's
    storage) may instead keep it Enabled behind a firewall that admits nothing from the public
    network: default Deny, no IP and no VNet rules, so only private endpoints, trusted Azure
    services and resource-instance rules get in. That is Azure ML's generally available
    configuration for a private workspace's storage ("Secure Azure storage accounts",
    https://learn.microsoft.com/azure/machine-learning/how-to-secure-workspace-vnet)."""
    if args.resource_type != STORAGE or not is_prod(args.props):
        return
    access = get(args.props, "publicNetworkAccess")
    if access in ("Disabled", UNKNOWN):
        return
    shown = access or "not set (Enabled)"
    if get(args.props, "kind") in DATA_ACCOUNT_KINDS:
        yield (
            f"storage account '{args.name}' (prod): publicNetworkAccess is {shown}; prod data "
            "accounts are reached only by private endpoints"
        )
        return
    rules = get(args.props, "networkRuleSet", default={})
    if rules is UNKNOWN:
        return
    default_action = get(rules, "defaultAction")
    ip_rules = get(rules, "ipRules", default=[])
    vnet_rules = get(rules, "virtualNetworkRules", default=[])
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


def _nfs_internet(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type != STORAGE or get(args.props, "kind") != "FileStorage":
        return
    access = get(args.props, "publicNetworkAccess")
    default_action = get(args.props, "networkRuleSet", "defaultAction")
    ip_rules = get(args.props, "networkRuleSet", "ipRules", default=[])
    if UNKNOWN in (access, default_action, ip_rules) or access == "Disabled":
        return
    if default_action != "Deny":
        yield (
            f"NFS account '{args.name}': its firewall's defaultAction is "
            f"{default_action or 'not set (Allow)'}, so the internet can reach it"
        )
    elif len(ip_rules):
        yield f"NFS account '{args.name}': its firewall admits internet addresses (ipRules)"


def _registry_admin(args: ResourceValidationArgs) -> Iterator[str]:
    if not arm.is_registry(args.resource_type, args.props):
        return
    if get(arm.arm_properties(args.resource_type, args.props), "adminUserEnabled") is True:
        yield f"container registry '{args.name}': the admin user is enabled"


def _local_image_build(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type in LOCAL_IMAGE_BUILDS:
        yield (
            f"image '{args.name}' ({args.resource_type}) is built on the machine that runs "
            "`pulumi up`, which then needs a Docker engine and a network path to the registry "
            "(a private registry has none from outside its VNet)"
        )


def _datastore_skips_validation(args: ResourceValidationArgs) -> Iterator[str]:
    """Azure ML validates a datastore at creation by reaching its storage with the caller's
    credentials (the ARM spec's `skipValidation`: "Flag to skip validation", on the datastore
    PUT, machinelearningservices 2025-12-01); with identity-based access that asks the
    deploying identity for a data-plane role it need not have."""
    if args.resource_type != DATASTORE:
        return
    skip = get(args.props, "skipValidation")
    if skip is not True and skip is not UNKNOWN:
        yield (
            f"datastore '{args.name}': skipValidation is {'not set' if skip is None else skip}, "
            "so creating it needs the deploying identity to reach the storage's data plane"
        )


def _prod_compute_access(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type != COMPUTE or not is_prod(args.props):
        return
    if get(args.props, "properties", "computeType") != "AmlCompute":
        return
    node = get(args.props, "properties", "properties", default={})
    if node is UNKNOWN:
        return
    public_ip = get(node, "enableNodePublicIp")
    if public_ip is not False and public_ip is not UNKNOWN:
        shown = "not set (Azure's default: true)" if public_ip is None else public_ip
        yield f"compute '{args.name}' (prod): enableNodePublicIp is {shown}; nodes get public IPs"
    ssh = get(node, "remoteLoginPortPublicAccess")
    if ssh not in ("Disabled", UNKNOWN):
        yield (
            f"compute '{args.name}' (prod): remoteLoginPortPublicAccess is "
            f"{ssh or 'not set (NotSpecified)'}; the SSH port may be open"
        )


def _is_allowed_source(source: str) -> bool:
    if source.split(".")[0] in INBOUND_SERVICE_TAGS or source in INBOUND_INTERNAL:
        return True
    try:
        return ipaddress.ip_network(source, strict=False).is_private
    except ValueError:
        return False  # "*", "Internet", "Any" and every other tag


def _rule_violations(label: str, rule: Any) -> Iterator[str]:
    if get(rule, "direction") != "Inbound" or get(rule, "access") != "Allow":
        return
    prefixes = get(rule, "sourceAddressPrefixes", default=[])
    sources = [get(rule, "sourceAddressPrefix"), *([] if prefixes is UNKNOWN else prefixes)]
    for source in sources:
        if isinstance(source, str) and not _is_allowed_source(source):
            yield (
                f"{label} allows inbound traffic from '{source}'; only "
                f"{', '.join(INBOUND_SERVICE_TAGS)} may reach the subnet"
            )


def _nsg_inbound(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type == NSG:
        rules = get(args.props, "securityRules", default=[])
        if rules is UNKNOWN:
            return
        for i in range(len(rules)):
            rule = get(rules, i)
            yield from _rule_violations(f"NSG '{args.name}' rule '{get(rule, 'name')}'", rule)
    elif args.resource_type == NSG_RULE:
        yield from _rule_violations(f"NSG rule '{args.name}'", args.props)


def _is_deny_all_outbound(rule: Any) -> bool:
    return (
        get(rule, "direction") == "Outbound"
        and get(rule, "access") == "Deny"
        and get(rule, "destinationAddressPrefix") in ("*", "Internet")
        and get(rule, "protocol") == "*"
        and get(rule, "destinationPortRange") == "*"
    )


def _prod_nsg_outbound(args: ResourceValidationArgs) -> Iterator[str]:
    """A prod compute subnet's NSG (one admitting Azure ML's control plane) ends its outbound
    rules with a deny-all: without one, Azure's default AllowInternetOutBound lets every
    destination through (learn.microsoft.com/azure/virtual-network/
    network-security-groups-overview#default-security-rules)."""
    if args.resource_type != NSG or not is_prod(args.props):
        return
    rules = get(args.props, "securityRules", default=[])
    if rules is UNKNOWN:
        return
    rules = [get(rules, i) for i in range(len(rules))]
    compute_subnet = any(
        get(r, "direction") == "Inbound"
        and str(get(r, "sourceAddressPrefix") or "").split(".")[0] in INBOUND_SERVICE_TAGS
        for r in rules
    )
    if not compute_subnet:
        return
    denies = [r for r in rules if _is_deny_all_outbound(r)]
    if not denies:
        yield (
            f"NSG '{args.name}' (prod) has no deny-all outbound rule, so Azure's default rules "
            "allow all outbound traffic"
        )
        return
    deny_priority = min(get(r, "priority") for r in denies)
    later = [
        get(r, "name")
        for r in rules
        if get(r, "direction") == "Outbound"
        and get(r, "access") == "Allow"
        and isinstance(get(r, "priority"), (int, float))
        and get(r, "priority") > deny_priority
    ]
    if later:
        yield (
            f"NSG '{args.name}' (prod): outbound rules {', '.join(map(str, later))} come after "
            f"the deny-all (priority {deny_priority}) and never apply"
        )
    allowed = {
        _service_tag(get(r, "destinationAddressPrefix"))
        for r in rules
        if get(r, "direction") == "Outbound"
        and get(r, "access") == "Allow"
        and isinstance(get(r, "priority"), (int, float))
        and get(r, "priority") < deny_priority
    }
    missing = [tag for tag in REQUIRED_OUTBOUND_TAGS if tag not in allowed]
    if missing:
        yield (
            f"NSG '{args.name}' (prod) denies outbound traffic Azure ML requires of its compute: "
            f"no allow rule before the deny-all for {', '.join(missing)}"
        )


def _service_tag(prefix: Any) -> str | None:
    """`Storage.westeurope` -> `Storage`; `AzureFrontDoor.FrontEnd` stays (not a region)."""
    if not isinstance(prefix, str):
        return None
    tag = prefix.partition(".")[0]
    return prefix if tag == "AzureFrontDoor" else tag


def _vm_login(args: ResourceValidationArgs) -> Iterator[str]:
    """VMs (the jump host) take no password, and in prod no public IP: operators come in
    through Bastion with their Entra identity (docs/access.md)."""
    if args.resource_type == VM:
        if get(args.props, "osProfile", "adminPassword") not in (None, UNKNOWN):
            yield f"virtual machine '{args.name}' has an admin password in its osProfile"
        linux = get(args.props, "osProfile", "linuxConfiguration")
        if linux not in (None, UNKNOWN):
            disabled = get(linux, "disablePasswordAuthentication")
            if disabled is not True and disabled is not UNKNOWN:
                yield (
                    f"virtual machine '{args.name}': disablePasswordAuthentication is "
                    f"{'not set (false)' if disabled is None else disabled}; SSH accepts passwords"
                )
    elif args.resource_type == NIC and is_prod(args.props):
        configs = get(args.props, "ipConfigurations", default=[])
        if configs is UNKNOWN:
            return
        for i in range(len(configs)):
            if get(configs, i, "publicIPAddress") is not None:
                yield f"network interface '{args.name}' (prod) has a public IP address"


def _role_breadth(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type != ROLE_ASSIGNMENT:
        return
    role_id = get(args.props, "roleDefinitionId")
    if isinstance(role_id, str):
        role = PRIVILEGED_ROLES.get(role_id.rstrip("/").rsplit("/", 1)[-1].lower())
        if role:
            yield (
                f"role assignment '{args.name}' grants {role}; the cluster identity needs only "
                "data-plane roles (AcrPull, Storage Blob Data Reader/Contributor)"
            )
    scope = get(args.props, "scope")
    if isinstance(scope, str) and "/resourcegroups/" not in scope.lower():
        yield (
            f"role assignment '{args.name}' is scoped above a resource group (a subscription, "
            f"management group or the tenant root: {scope})"
        )


def _deployer_can_assign(args: ResourceValidationArgs) -> Iterator[str]:
    """The least-privilege deployer's condition (docs/deploy.md, infra/deployer.py) lets it
    assign only the stack's roles to managed identities, users and groups: any other role or
    principal type in the plan fails at deploy time with AuthorizationFailed."""
    if args.resource_type != ROLE_ASSIGNMENT:
        return
    role_id = get(args.props, "roleDefinitionId")
    if isinstance(role_id, str):
        guid = role_id.rstrip("/").rsplit("/", 1)[-1].lower()
        if guid not in ASSIGNABLE_ROLES.values():
            yield (
                f"role assignment '{args.name}' grants role {guid}, which the deployer's "
                "role-assignment condition does not allow"
            )
    kind = get(args.props, "principalType")
    if isinstance(kind, str) and kind not in ASSIGNABLE_PRINCIPAL_TYPES:
        yield (
            f"role assignment '{args.name}' is for a {kind}; the deployer's condition allows "
            f"{', '.join(ASSIGNABLE_PRINCIPAL_TYPES)}"
        )


@cache
def is_taggable(resource_type: str) -> bool:
    """Whether the azure-native resource type has `tags` (read from the SDK's own class)."""
    package, _, rest = resource_type.partition(":")
    module, _, name = rest.partition(":")
    if package != "azure-native" or not module or not name:
        return False
    try:
        cls = getattr(import_module(f"pulumi_azure_native.{module}"), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(getattr(cls, "tags", None), property)


def _required_tags(args: ResourceValidationArgs) -> Iterator[str]:
    if not is_taggable(args.resource_type):
        return
    tags = get(args.props, "tags", default={})
    if tags is UNKNOWN:
        return
    missing = [t for t in REQUIRED_TAGS if not isinstance(get(tags, t), str) or not get(tags, t)]
    if missing:
        kind = args.resource_type.split(":")[-1]
        yield f"{kind} '{args.name}' lacks the tags {', '.join(missing)}"


def _prod_data_protected(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type != STORAGE or not is_prod(args.props):
        return
    if get(args.props, "kind") in DATA_ACCOUNT_KINDS and not args.opts.protect:
        yield f"data account '{args.name}' (prod) is not protected: `pulumi destroy` can delete it"


def _prod_outputs_zone_redundant(args: ResourceValidationArgs) -> Iterator[str]:
    """Prod general-purpose accounts (the outputs account: checkpoints, logs) keep copies in
    three zones (storage-redundancy: ZRS, GZRS, RA-GZRS)."""
    if args.resource_type != STORAGE or not is_prod(args.props):
        return
    if get(args.props, "kind") != "StorageV2":
        return
    sku = get(args.props, "sku", "name")
    if sku is UNKNOWN or sku in ZONE_REDUNDANT_SKUS:
        return
    yield (
        f"storage account '{args.name}' (prod): sku {sku or 'not set'} keeps all copies in one "
        "availability zone"
    )


def _prod_registry_zone_redundancy(args: ResourceValidationArgs) -> Iterator[str]:
    """A prod Premium registry states zoneRedundancy Enabled (container-registry/zone-redundancy:
    a Premium option; the SDK's default is Disabled)."""
    if not arm.is_registry(args.resource_type, args.props) or not is_prod(args.props):
        return
    if get(args.props, "sku", "name") != "Premium":
        return
    zones = get(arm.arm_properties(args.resource_type, args.props), "zoneRedundancy")
    if zones not in ("Enabled", UNKNOWN):
        yield (
            f"container registry '{args.name}' (prod): zoneRedundancy is "
            f"{zones or 'not set (Disabled)'}"
        )


def _vm_encryption_at_host(args: ResourceValidationArgs) -> Iterator[str]:
    """VMs encrypt their temp disk and disk caches on the host too (disk-encryption,
    "Encryption at host")."""
    if args.resource_type != VM:
        return
    enabled = get(args.props, "securityProfile", "encryptionAtHost")
    if enabled is not True and enabled is not UNKNOWN:
        yield (
            f"virtual machine '{args.name}': securityProfile.encryptionAtHost is "
            f"{'not set (false)' if enabled is None else enabled}"
        )


# ---- stack policies -----------------------------------------------------------------------

# What each prod service must send to Log Analytics (infra/diagnostics.py has the categories).
DIAGNOSED_TYPES = (VAULT, WORKSPACE, STORAGE)  # and the registry, whichever form declares it


def _needs_diagnostics(node: deploy_order.Node) -> bool:
    diagnosed = node.type in DIAGNOSED_TYPES or arm.is_registry(node.type, node.props)
    if not diagnosed or not is_prod(node.props):
        return False
    # The NFS (FileStorage) account is a documented trade-off (docs/access.md).
    return node.type != STORAGE or get(node.props, "kind") != "FileStorage"


def _prod_diagnostics(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every prod Key Vault, registry, ML workspace and blob storage account has a diagnostic
    setting (one that takes the resource, or its blob service, as its resourceUri) sending its
    logs to a Log Analytics workspace."""
    graph = deploy_order.graph_from_policy_resources(args.resources)
    for node in graph.nodes.values():
        if not _needs_diagnostics(node):
            continue
        settings = graph.dependents(node, DIAGNOSTIC_SETTING)
        if not any(get(s.props, "workspaceId") is not None for s in settings):
            report_violation(
                f"{deploy_order.label(node)} (prod) sends no resource logs to Log Analytics: no "
                "diagnostic setting with a workspaceId takes it",
                node.id,
            )


def _prod_outputs_recoverable(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every prod general-purpose account (the outputs account) keeps deleted blobs (blob soft
    delete) and either versions or deleted containers (versioning or container soft delete):
    soft-delete-blob-overview, versioning-overview, soft-delete-container-overview."""
    graph = deploy_order.graph_from_policy_resources(args.resources)
    for node in graph.of_type(STORAGE):
        if not is_prod(node.props) or get(node.props, "kind") != "StorageV2":
            continue
        services = graph.dependents(node, BLOB_SERVICE)
        props = [s.props for s in services]
        if any(
            UNKNOWN
            in (
                get(p, "deleteRetentionPolicy", "enabled"),
                get(p, "isVersioningEnabled"),
                get(p, "containerDeleteRetentionPolicy", "enabled"),
            )
            for p in props
        ):
            continue  # fmt: skip
        recoverable = any(
            get(p, "deleteRetentionPolicy", "enabled") is True
            and (
                get(p, "isVersioningEnabled") is True
                or get(p, "containerDeleteRetentionPolicy", "enabled") is True
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


# ---- stack policy -------------------------------------------------------------------------


def _tasks_reach_their_registry(args: StackValidationArgs, report_violation: ReportViolation):
    """An ACR Tasks run pushes from Microsoft-hosted agents outside the VNet: a registry with
    network rules admits them only with networkRuleBypassAllowedForTasks (since 1 June 2025,
    https://learn.microsoft.com/azure/container-registry/manage-network-bypass-policy-for-tasks,
    ms.date 2025-05-15)."""
    registries = {}
    for res in args.resources:
        if arm.is_registry(res.resource_type, res.props):
            name = arm.arm_name(res.resource_type, res.props, "registryName")
            registries[name] = (res, arm.arm_properties(res.resource_type, res.props))
    for run in (r for r in args.resources if r.resource_type == TASK_RUN):
        found = registries.get(get(run.props, "registryName"))
        if found is None:
            continue
        registry, props = found
        restricted = get(props, "publicNetworkAccess") == "Disabled" or (
            get(props, "networkRuleSet", "defaultAction") == "Deny"
        )
        bypass = get(props, "networkRuleBypassAllowedForTasks")
        if restricted and bypass is not True and bypass is not UNKNOWN:
            report_violation(
                f"task run '{run.name}' builds into registry '{registry.name}', whose network "
                "rules refuse ACR Tasks' agents: networkRuleBypassAllowedForTasks is "
                f"{'not set (false)' if bypass is None else bypass}",
                run.urn,
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


def _kept_data_outlives_its_group(args: StackValidationArgs, report_violation: ReportViolation):
    """Deleting a resource group deletes everything in it, whatever Pulumi's protect or
    retainOnDelete says about a child (pulumi/pulumi-azure-native#2522). So storage accounts
    never share a group with the workspace (which `pulumi destroy` deletes with its group),
    and a protected account's group, where the stack declares it, is protected as well."""
    groups = {get(r.props, "resourceGroupName"): r for r in args.resources
              if r.resource_type == RESOURCE_GROUP}  # fmt: skip
    platform = {get(r.props, "resourceGroupName") for r in args.resources
                if r.resource_type == WORKSPACE}  # fmt: skip
    for account in (r for r in args.resources if r.resource_type == STORAGE):
        group_name = get(account.props, "resourceGroupName")
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


def gpu_spend_per_hour(resources: list[Any]) -> tuple[float, list[str], list[str], list[str]]:
    """(USD/hour of every GPU cluster at max nodes, lines of how, sizes without a price,
    clusters whose size or node count is known only after deployment, left out of the sum)."""
    total, lines, unpriced, unknown = 0.0, [], [], []
    for res in resources:
        if res.resource_type != COMPUTE:
            continue
        node = get(res.props, "properties", "properties", default={})
        if node is UNKNOWN:
            unknown.append(f"{res.name} (properties)")
            continue
        size, max_nodes = get(node, "vmSize"), get(node, "scaleSettings", "maxNodeCount")
        missing = [k for k, v in (("vmSize", size), ("maxNodeCount", max_nodes)) if v is UNKNOWN]
        if missing:
            unknown.append(f"{res.name} ({', '.join(missing)})")
            continue
        if not isinstance(size, str) or not isinstance(max_nodes, int | float):
            continue
        catalogue = VM_SIZES.get(size)
        if catalogue is not None and catalogue.gpus == 0:
            continue  # a CPU cluster (image builds): not GPU spend
        location = get(res.props, "location")  # prices are per region (prices.yaml)
        price = load_prices(region=location if isinstance(location, str) else None).vm(size)
        if price is None or catalogue is None:
            unpriced.append(size)
            continue
        total += price * max_nodes
        lines.append(f"{res.name}: {int(max_nodes)} x {size} at {price:.2f} USD/h")
    return total, lines, unpriced, unknown


def _gpu_budget(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    budget = args.get_config().get("maxGpuSpendPerHourUsd")
    if budget is None:  # the stack's own setting, where the engine hands the pack its config
        budget = pulumi.runtime.get_config("azdl:maxGpuSpendPerHourUsd")
    if budget is None:
        report_violation(
            "no GPU budget given: set the policy config maxGpuSpendPerHourUsd "
            "(`azdl policy --pack-config STACK` writes it from the stack)",
            None,
        )
        return
    total, lines, unpriced, _unknown = gpu_spend_per_hour(args.resources)
    for size in unpriced:
        report_violation(
            f"{load_prices().no_vm_price(size)}, so the GPU spend cannot be checked against "
            "the budget: add its price to azdl/review/prices.yaml",
            None,
        )
    if total > float(budget):
        report_violation(
            f"maximum GPU spend {total:.2f} USD/h exceeds the budget {float(budget):.2f} USD/h "
            f"({'; '.join(lines)}; {load_prices().label})",
            None,
        )


def _gpu_spend_known(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    for cluster in gpu_spend_per_hour(args.resources)[3]:
        report_violation(
            f"compute {cluster}: not known until deploy, so this cluster is left out of the "
            "GPU budget check",
            None,
        )


def _deploy_order_policy(rule: deploy_order.Rule) -> StackValidationPolicy:
    """A stack policy for one deploy-order rule (`azdl/review/deploy_order.py`): CrossGuard
    hands a stack validation every resource with its dependencies, the graph Pulumi deploys by.
    """

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        graph = deploy_order.graph_from_policy_resources(args.resources)
        for violation in rule.check(graph):
            report_violation(violation.message, violation.resource)

    return StackValidationPolicy(
        name=rule.name,
        description=f"{rule.description} Source: {rule.docs[0]}",
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.CRITICAL,
        remediation_steps=rule.remediation,
    )


# ---- the policies --------------------------------------------------------------------------


def _resource_policy(
    name: str,
    description: str,
    severity: Severity,
    remediation: str,
    check: Callable[[ResourceValidationArgs], Iterator[str]],
) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in check(args):
            report_violation(f"{message}. Fix: {remediation}", None)

    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=severity,
        remediation_steps=remediation,
    )


POLICIES = [
    _resource_policy(
        "storage-minimum-tls-1-2",
        "Storage accounts accept only TLS 1.2 or later.",
        Severity.HIGH,
        "set minimum_tls_version='TLS1_2' on the storage account",
        _storage_tls,
    ),
    _resource_policy(
        "storage-no-public-blob-access",
        "No anonymous (public) blob access on accounts or containers.",
        Severity.HIGH,
        "set allow_blob_public_access=False on the account and public_access='None' on containers",
        _public_blob_access,
    ),
    _resource_policy(
        "storage-private-in-prod",
        "Prod storage is reached only privately: data accounts disable public network access; "
        "the workspace's storage either does too or denies every public address in its firewall.",
        Severity.CRITICAL,
        "use network.mode privateEndpoints in the prod stack (data accounts: "
        "public_network_access='Disabled'; the workspace's storage: firewall default_action "
        "'Deny' with no ip_rules or virtual_network_rules, or storage.workspaceStorage: private)",
        _prod_public_network,
    ),
    _resource_policy(
        "nfs-not-internet-reachable",
        "NFS (FileStorage) accounts are reachable from the VNet only.",
        Severity.CRITICAL,
        "give the NFS account network_rule_set default_action='Deny' with VNet rules only, "
        "or disable public network access",
        _nfs_internet,
    ),
    _resource_policy(
        "registry-admin-user-disabled",
        "Container registries keep the admin user (a shared password) off.",
        Severity.HIGH,
        "set admin_user_enabled=False; pull with the cluster identity's AcrPull role",
        _registry_admin,
    ),
    _resource_policy(
        "images-built-in-azure",
        "Images are built by ACR Tasks in Azure, not on the machine that runs `pulumi up`.",
        Severity.HIGH,
        "build with a containerregistry TaskRun from an uploaded context (infra/images.py)",
        _local_image_build,
    ),
    _resource_policy(
        "datastores-skip-validation",
        "Datastores are created with skipValidation, so deploying needs no data-plane role.",
        Severity.MEDIUM,
        "set skip_validation=True on the Datastore",
        _datastore_skips_validation,
    ),
    _resource_policy(
        "compute-no-public-access-in-prod",
        "Prod AmlCompute nodes get no public IP and no open SSH port.",
        Severity.HIGH,
        "set enable_node_public_ip=False and remote_login_port_public_access='Disabled'",
        _prod_compute_access,
    ),
    _resource_policy(
        "nsg-inbound-azureml-only",
        "Inbound NSG rules admit only Azure ML's service tags (and in-VNet traffic).",
        Severity.CRITICAL,
        "remove the rule; Azure ML needs inbound only from BatchNodeManagement and "
        "AzureMachineLearning",
        _nsg_inbound,
    ),
    _resource_policy(
        "nsg-outbound-restricted-in-prod",
        "Prod compute subnets allow Azure ML's documented outbound list, then deny all.",
        Severity.HIGH,
        "set network.outbound: restricted in the prod stack (infra/network.py adds Azure ML's "
        "outbound rules and a deny-all at priority 4096)",
        _prod_nsg_outbound,
    ),
    _resource_policy(
        "vm-no-password-no-public-ip",
        "Virtual machines (the jump host) take no password logins, and in prod no public IP.",
        Severity.HIGH,
        "set linux_configuration.disable_password_authentication=True with an SSH public key, "
        "leave admin_password unset, and reach the VM through Azure Bastion (access.jumpHost)",
        _vm_login,
    ),
    _resource_policy(
        "role-assignments-least-privilege",
        "No Owner/Contributor-class roles and no scope above a resource group.",
        Severity.HIGH,
        "grant a data-plane role (AcrPull, Storage Blob Data Reader/Contributor) on the one "
        "resource that needs it",
        _role_breadth,
    ),
    _resource_policy(
        "role-assignments-deployer-can-make",
        "Role assignments use only the roles and principal types the least-privilege deployer's "
        "condition allows.",
        Severity.HIGH,
        "take the role from infra/roles.py (which the condition in docs/deploy.md is generated "
        "from) and set principalType to ServicePrincipal, User or Group",
        _deployer_can_assign,
    ),
    _resource_policy(
        "required-tags",
        "Every taggable resource carries environment, project, owner and costCenter.",
        Severity.MEDIUM,
        "add the missing keys to azdl:tags in the stack file (the program tags every resource)",
        _required_tags,
    ),
    _resource_policy(
        "data-accounts-protected-in-prod",
        "Prod data accounts (premium blob, NFS) are protected from deletion.",
        Severity.HIGH,
        "set storage.dataProtection: protect in the prod stack",
        _prod_data_protected,
    ),
    _resource_policy(
        "outputs-zone-redundant-in-prod",
        "Prod general-purpose storage (checkpoints, logs) is zone-redundant.",
        Severity.MEDIUM,
        "set storage.outputsRedundancy: ZRS or GZRS (sku Standard_ZRS/Standard_GZRS)",
        _prod_outputs_zone_redundant,
    ),
    _resource_policy(
        "registry-zone-redundant-in-prod",
        "A prod Premium registry states zone redundancy Enabled.",
        Severity.MEDIUM,
        "set zone_redundancy='Enabled' on the registry (infra/registry.py does in prod)",
        _prod_registry_zone_redundancy,
    ),
    _resource_policy(
        "vm-encryption-at-host",
        "Virtual machines (the jump host) encrypt at host.",
        Severity.MEDIUM,
        "set security_profile.encryption_at_host=True and register the subscription feature "
        "Microsoft.Compute/EncryptionAtHost",
        _vm_encryption_at_host,
    ),
    StackValidationPolicy(
        name="diagnostic-settings-in-prod",
        description="Prod Key Vault, registry, ML workspace and blob storage send resource logs "
        "to Log Analytics.",
        validate=_prod_diagnostics,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
        remediation_steps="add a monitor.DiagnosticSetting with workspace_id for the resource "
        "(storage: its blobServices/default); infra/diagnostics.py declares them",
    ),
    StackValidationPolicy(
        name="outputs-recoverable-in-prod",
        description="Prod general-purpose storage keeps deleted blobs, and versions or deleted "
        "containers.",
        validate=_prod_outputs_recoverable,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
        remediation_steps="add storage.BlobServiceProperties with delete_retention_policy and "
        "is_versioning_enabled or container_delete_retention_policy (infra/storage.py)",
    ),
    StackValidationPolicy(
        name="gpu-spend-within-budget",
        description="The GPU clusters at max nodes cost no more per hour than the budget.",
        validate=_gpu_budget,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(
            properties={"maxGpuSpendPerHourUsd": {"type": "number", "exclusiveMinimum": 0}}
        ),
        severity=Severity.HIGH,
        remediation_steps="lower cluster.maxNodes or cluster.vmSize, or raise "
        "azdl:maxGpuSpendPerHourUsd after approval",
    ),
    StackValidationPolicy(
        name="gpu-spend-known",
        description="Every GPU cluster's VM size and max nodes are known before deployment, "
        "so gpu-spend-within-budget can count them.",
        validate=_gpu_spend_known,
        enforcement_level=EnforcementLevel.ADVISORY,
        severity=Severity.MEDIUM,
        remediation_steps="set the cluster's vmSize and scaleSettings.maxNodeCount from stack "
        "config, not from another resource's outputs",
    ),
    StackValidationPolicy(
        name="tasks-reach-their-registry",
        description="A registry that ACR Tasks build into and that restricts network access "
        "lets tasks bypass its network rules (networkRuleBypassAllowedForTasks).",
        validate=_tasks_reach_their_registry,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
        remediation_steps="set properties.networkRuleBypassAllowedForTasks: true on the "
        "registry (API 2025-05-01-preview or later; infra/registry.py)",
    ),
    StackValidationPolicy(
        name="soft-deleted-names-per-deployment",
        description="Workspace and Key Vault names derive from a per-deployment id that no "
        "protected resource depends on, so `up` after `destroy` never meets the soft-deleted ones.",
        validate=_soft_deleted_names_per_deployment,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
        remediation_steps="name them with the deployment id (infra/naming.py with_deployment) "
        "and keep the id out of protected resources' inputs (infra/program.py)",
    ),
    StackValidationPolicy(
        name="kept-data-outlives-its-group",
        description="Storage accounts sit outside the workspace's resource group, and a "
        "protected account's group is protected too (deleting a group deletes its contents).",
        validate=_kept_data_outlives_its_group,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
        remediation_steps="put storage accounts in the data resource group and give that "
        "group the strongest protection of what it holds (infra/program.py)",
    ),
    *(_deploy_order_policy(rule) for rule in deploy_order.RULES),
]
