"""The stack's configuration: read and validated in one place, before any resource exists.

`load_config(values, stack=...)` turns the `azdl:*` keys of a stack (as Pulumi hands them
over, or as read from `stacks/Pulumi.<stack>.yaml` by `load_stack_file`) into one frozen
`StackConfig`. Every problem raises `ConfigError` with the key, the bad value and what is
allowed. Pure Python (no Pulumi import) so the CLI can validate a stack file cheaply.
"""

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import yaml

from infra.catalogue import VM_SIZES, VmSize
from infra.naming import IMAGE_BUILD_COMPUTE, KINDS, Names, derive_names, rule_violation

PROJECT = "azdl"
ENVIRONMENTS = ("dev", "test", "staging", "prod")
NETWORK_MODES = ("serviceEndpoints", "privateEndpoints")
DATA_PROTECTION = ("protect", "retain", "none")
REGISTRY_SKUS = ("Basic", "Standard", "Premium")
IMAGE_FRAMEWORKS = ("tensorflow", "pytorch")  # images/<framework>/Dockerfile
PRIORITIES = {"dedicated": "Dedicated", "lowPriority": "LowPriority"}
REQUIRED_TAGS = ("environment", "project", "owner", "costCenter")
MIN_NFS_SHARE_GIB = 100  # smallest premium (provisioned) file share Azure accepts
# network.outbound: restricted = the complete outbound list Azure ML compute needs, then a
# deny-all (infra/network.py); open = no outbound rules, so Azure's default allows everything.
OUTBOUND_MODES = ("restricted", "open")
# storage.workspaceStorage, the networking of the workspace's default (outputs) account:
# firewall = Azure ML's documented configuration for a private workspace (private endpoints +
# firewall default deny, a resource-instance rule for the workspace, trusted services,
# shared-key access on); private = public network access disabled, shared keys on (what the
# Azure Verified Module's private BYO-VNet example deploys, for landing zones whose policy
# forbids public endpoints); strict = public access and shared keys off, which Azure ML
# documents as preview and not for production (how-to-disable-local-auth-storage).
WORKSPACE_STORAGE_MODES = ("firewall", "private", "strict")
# storage.outputsRedundancy: the outputs account's replication (sku Standard_<value>). Prod
# takes a zone-redundant one (ZRS, GZRS): checkpoints survive a zone outage
# (learn.microsoft.com/azure/storage/common/storage-redundancy).
OUTPUTS_REDUNDANCY = ("LRS", "ZRS", "GZRS")
ZONE_REDUNDANT = ("ZRS", "GZRS")
# network.dnsZoneGroups: stack = each private endpoint gets a DNS zone group from the stack;
# policy = none: a landing zone's Azure Policy (DeployIfNotExists) registers the endpoints in
# its central zones, as the Azure Verified Modules' private_endpoints_manage_dns_zone_group =
# false leaves it (Azure/terraform-azurerm-avm-res-machinelearningservices-workspace#124).
DNS_ZONE_GROUP_MODES = ("stack", "policy")
PRINCIPAL_TYPES = ("User", "Group")  # what an operator's Entra object id names
BASTION_SKUS = ("Basic", "Standard")  # Standard: native-client (az network bastion ssh) tunnels
# Sub-resource (private-endpoint group id) -> the private DNS zones its endpoint registers in
# (Azure's "private endpoint DNS zone values" table; infra/private_link.py creates or reuses them).
ENDPOINT_DNS_ZONES = {
    "amlworkspace": ("privatelink.api.azureml.ms", "privatelink.notebooks.azure.net"),
    "blob": ("privatelink.blob.core.windows.net",),
    "file": ("privatelink.file.core.windows.net",),
    "vault": ("privatelink.vaultcore.azure.net",),
    "registry": ("privatelink.azurecr.io",),
}
PRIVATE_DNS_ZONES = tuple(sorted({z for zones in ENDPOINT_DNS_ZONES.values() for z in zones}))
_GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GROUP = rf"/subscriptions/{_GUID}/resourceGroups/[-\w.()]{{1,90}}/providers/"
_VNET = r"Microsoft\.Network/virtualNetworks/[-\w.]{2,64}"
ARM_ID_PATTERNS = {  # kind -> (pattern, an example) for resource ids a stack may name
    "subnet": (
        re.compile(_GROUP + _VNET + r"/subnets/[-\w.]{1,80}", re.IGNORECASE),
        "/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Network/"
        "virtualNetworks/<vnet>/subnets/<subnet>",
    ),
    "virtual network": (
        re.compile(_GROUP + _VNET, re.IGNORECASE),
        "/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Network/"
        "virtualNetworks/<vnet>",
    ),
    "private DNS zone": (
        re.compile(_GROUP + r"Microsoft\.Network/privateDnsZones/[-\w.]+", re.IGNORECASE),
        "/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Network/"
        "privateDnsZones/<zone>",
    ),
}

# Top-level keys (without the `azdl:` namespace). String-valued keys are passed through as
# they are; every other key holds YAML/JSON structure.
STRING_KEYS = ("environment", "location", "namePrefix", "imageBuildVmSize")
STRING_KEYS += ("nameSuffix",)  # pins the global names' suffix (infra/naming.py)
OBJECT_KEYS = ("tags", "maxGpuSpendPerHourUsd", "network", "storage", "registry", "cluster")
OBJECT_KEYS += ("images",)  # prebuilt image refs instead of building them (infra/images.py)
OBJECT_KEYS += ("operators", "access")  # who operates a stack, how they get in: docs/access.md
KEYS = STRING_KEYS + OBJECT_KEYS
REQUIRED_KEYS = ("environment", "location", "namePrefix", "tags", "maxGpuSpendPerHourUsd")
REQUIRED_KEYS += ("network", "cluster")


class ConfigError(ValueError):
    """An invalid stack setting; the message names the key, the bad value and what is allowed."""


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{PROJECT}:{key} = {value!r} is invalid: {allowed}")


@dataclass(frozen=True)
class ExistingSubnets:
    """`network.existing`: a landing zone's subnets, used instead of a VNet of the stack's own."""

    training_subnet_id: str
    endpoint_subnet_id: str

    @property
    def vnet_id(self) -> str:
        return self.training_subnet_id.rsplit("/subnets/", 1)[0]


@dataclass(frozen=True)
class NetworkConfig:
    # None with `existing` (the landing zone owns the address plan)
    address_space: ipaddress.IPv4Network | None
    training_subnet: ipaddress.IPv4Network | None
    endpoint_subnet: ipaddress.IPv4Network | None
    mode: str  # one of NETWORK_MODES
    public_network_access: bool
    allowed_ip_ranges: tuple[str, ...]
    outbound: str = "restricted"  # one of OUTBOUND_MODES; unused with `existing`
    existing: ExistingSubnets | None = None
    # zone name -> id of an existing (central) private DNS zone the stack uses, not creates
    private_dns_zone_ids: Mapping[str, str] = dataclass_field(default_factory=dict)
    # VNets (e.g. a peered hub) linked to the zones the stack creates, besides its own
    dns_zone_vnet_links: tuple[str, ...] = ()
    dns_zone_groups: str = "stack"  # one of DNS_ZONE_GROUP_MODES

    @property
    def zone_groups_by_policy(self) -> bool:
        return self.dns_zone_groups == "policy"

    @property
    def private(self) -> bool:
        return self.mode == "privateEndpoints"


@dataclass(frozen=True)
class Operator:
    """A person or group that runs `azdl data stage`, `azdl submit` and `azdl bench`."""

    object_id: str  # Microsoft Entra object id
    principal_type: str  # one of PRINCIPAL_TYPES
    name: str  # for people reading the plan; Azure does not check it


@dataclass(frozen=True)
class JumpHostConfig:
    """`access.jumpHost`: Azure Bastion plus a small Linux VM inside the stack's VNet."""

    bastion_subnet: ipaddress.IPv4Network
    jump_host_subnet: ipaddress.IPv4Network
    vm_size: str
    admin_username: str
    ssh_public_key: str
    bastion_sku: str  # one of BASTION_SKUS


@dataclass(frozen=True)
class StorageConfig:
    data_container: str
    outputs_container: str
    nfs_share_gib: int  # 0: no NFS share (and no NFS account)
    data_protection: str  # one of DATA_PROTECTION
    outputs_protection: str  # one of DATA_PROTECTION: the outputs account (checkpoints, logs)
    workspace_storage: str = "firewall"  # one of WORKSPACE_STORAGE_MODES
    outputs_redundancy: str = "LRS"  # one of OUTPUTS_REDUNDANCY

    @property
    def outputs_sku(self) -> str:
        return f"Standard_{self.outputs_redundancy}"


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    vm_size: VmSize
    priority: str  # Azure's spelling: Dedicated | LowPriority
    min_nodes: int
    max_nodes: int
    idle_seconds_before_scale_down: int
    node_public_ip: bool


@dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    environment: str
    location: str
    name_prefix: str
    tags: Mapping[str, str]
    max_gpu_spend_per_hour_usd: float
    network: NetworkConfig
    storage: StorageConfig
    registry_sku: str
    cluster: ClusterConfig
    image_build_vm_size: VmSize
    names: Names
    subscription_id: str | None  # None: not known yet (names' suffix is a placeholder)
    name_suffix: str | None  # azdl:nameSuffix, the stack's own suffix for global names
    # framework -> prebuilt image ref (azdl:images.prebuilt); those frameworks are not built
    prebuilt_images: Mapping[str, str]
    operators: tuple[Operator, ...] = ()
    jump_host: JumpHostConfig | None = None


class _Section:
    """Typed access to one structured key, rejecting unknown sub-keys."""

    def __init__(self, key: str, raw: Any, known: tuple[str, ...] | None = None):
        parent = _declared_path(key)
        children = tuple(
            k.rpartition(".")[2] for k in CONFIG_KEYS if k.rpartition(".")[0] == parent
        )
        known = children if known is None else known
        for name in known:
            _declared(f"{key}.{name}")
        if set(known) != set(children):
            raise LookupError(
                f"infra/config.py: {PROJECT}:{key} accepts {', '.join(known)} but CONFIG_KEYS "
                f"declares {', '.join(children)}"
            )
        if not isinstance(raw, Mapping):
            raise _fail(key, raw, f"an object with the keys {', '.join(known)}")
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise _fail(
                f"{key}.{unknown[0]}", raw[unknown[0]], f"unknown key; known: {', '.join(known)}"
            )
        self.key, self.raw = key, raw

    def get(self, name: str, kind: type | None = None, default: Any = ...) -> Any:
        """The sub-key's value. Type and default come from CONFIG_KEYS when not given; when
        given they must agree with the declaration."""
        key = f"{self.key}.{name}"
        declared = _declared(key)
        kind = declared.type if kind is None else kind
        if default is ... and not isinstance(declared.default, (Required, Computed)):
            default = declared.default
        agrees = kind is declared.type and (
            isinstance(declared.default, Computed)
            or (
                (default is ...) == isinstance(declared.default, Required)
                and (default is ... or default == declared.default)
            )
        )
        if not agrees:
            raise LookupError(
                f"infra/config.py validates {PROJECT}:{key} as {kind.__name__} with default "
                f"{'(required)' if default is ... else repr(default)}, but CONFIG_KEYS declares "
                f"{declared.type.__name__} with default {declared.default!r}"
            )
        if name not in self.raw:
            if default is ...:
                raise ConfigError(f"{PROJECT}:{key} is required but missing")
            return default
        return _typed(key, self.raw[name], kind)


TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
              list: "a list", dict: "an object"}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Every key, declared once. docs/configuration.md is generated from this table (type, default,
# allowed values, description), and the validation below checks itself against it: a sub-key a
# `_Section` accepts, or a `get` whose type/default or a `_one_of` whose choices differ from the
# declaration, fails every load with a message saying so. To add a key: add a `Key(...)` here
# (keep to the section's order) and validate it in the section's function as before.
class Required:
    """The default of a key that has none."""

    def __repr__(self) -> str:
        return "(required)"


@dataclass(frozen=True)
class Computed:
    """A default the validation derives from other keys, described in words."""

    words: str

    def __repr__(self) -> str:
        return self.words


REQUIRED = Required()


@dataclass(frozen=True)
class Key:
    """One `azdl:` setting as the configuration reference shows it."""

    path: str  # dotted, without the namespace: "cluster.maxNodes"
    type: type  # str, int, float, bool, list or dict
    doc: str  # what it does, in one or two sentences (Markdown)
    default: Any = REQUIRED  # a value, REQUIRED, or Computed("how it is derived")
    allowed: tuple[str, ...] | str = ()  # the choices, or the rule in words
    example: Any = None  # a value for the `pulumi config set` line (default: the default)


CONFIG_KEYS: dict[str, Key] = {
    key.path: key
    for key in (
        Key(
            "environment",
            str,
            "Only `prod` enforces private networking (network.mode "
            "privateEndpoints, no public access, no node public IPs, Premium registry).",
            allowed=ENVIRONMENTS,
            example="dev",
        ),
        Key(
            "location",
            str,
            "Azure region (programmatic name); everything is created here. "
            "It needs GPU quota for `cluster.vmSize` x `cluster.maxNodes`.",
            allowed="an Azure region's programmatic name, e.g. westeurope",
            example="westeurope",
        ),
        Key(
            "namePrefix",
            str,
            "Every Azure name derives from it (resource group "
            "`<prefix>-rg`, storage `<prefix>data<6 hex>`); it must keep every derived name "
            "within Azure's rules, so keep it short.",
            allowed="lowercase letters and digits, starting with a letter",
            example="azdldev",
        ),
        Key(
            "nameSuffix",
            str,
            "Pins the 6-hex suffix of the globally unique names (storage accounts, registry, Key "
            "Vault). Unset: hashed from project, stack, subscription and resource group, "
            "so the same "
            "stack in another subscription gets other names (docs/deploy.md, Names).",
            default=Computed("hashed from the subscription and resource group"),
            allowed="4-12 lowercase letters and digits",
            example="team42",
        ),
        Key(
            "tags",
            dict,
            "Tags on every taggable resource. Extra tags are allowed; "
            "`tags.environment` must equal `environment`.",
            allowed="an object with at least " + ", ".join(REQUIRED_TAGS) + " (non-empty strings)",
            example={
                "environment": "dev",
                "project": "azdl",
                "owner": "ml-platform",
                "costCenter": "cc-ml-0001",
            },
        ),
        Key(
            "maxGpuSpendPerHourUsd",
            float,
            "GPU spend ceiling in USD per hour for the whole "
            "cluster at maxNodes; `azdl plan` and the policies compare the cluster's price "
            "against it.",
            allowed="a positive number",
            example=10,
        ),
        Key(
            "network",
            dict,
            "The VNet, its two subnets and how services are reached (infra/network.py).",
        ),
        Key(
            "network.addressSpace",
            str,
            "The VNet's range; both subnets must lie inside it.",
            allowed="a private (RFC 1918) IPv4 CIDR block",
            example="10.40.0.0/16",
        ),
        Key(
            "network.trainingSubnet",
            str,
            "The cluster's subnet; carries the NSG (and the NAT "
            "gateway when nodes have no public IP).",
            allowed="a /28 or larger inside addressSpace",
            example="10.40.0.0/20",
        ),
        Key(
            "network.privateEndpointSubnet",
            str,
            "Subnet for private endpoints; reserved in "
            "serviceEndpoints mode so switching modes never renumbers the VNet.",
            allowed="a /28 or larger inside addressSpace, not overlapping trainingSubnet",
            example="10.40.16.0/24",
        ),
        Key(
            "network.mode",
            str,
            "`serviceEndpoints`: services keep public endpoints whose "
            "firewalls admit only the training subnet and allowedIpRanges. "
            "`privateEndpoints`: no public access; every service gets a private endpoint and "
            "DNS zone (required in prod).",
            allowed=NETWORK_MODES,
            example="serviceEndpoints",
        ),
        Key(
            "network.publicNetworkAccess",
            bool,
            "Must be true with serviceEndpoints and false "
            "with privateEndpoints; prod refuses true.",
            default=Computed("true with serviceEndpoints, else false"),
            allowed="true or false",
        ),
        Key(
            "network.allowedIpRanges",
            list,
            "Public IPs/ranges that may reach storage and Key "
            "Vault through their firewalls (e.g. the machine running `azdl data stage`).",
            default=[],
            allowed="public IPv4 addresses (written without a prefix) or public ranges of /30 or "
            "larger; empty with privateEndpoints",
            example=["40.74.10.7"],
        ),
        Key(
            "network.outbound",
            str,
            "`restricted`: the training subnet's NSG allows only the outbound "
            "Azure ML documents for compute clusters, then denies all; `open`: no outbound "
            "rule (Azure's "
            "default allows all). Not set with network.existing.",
            default="restricted",
            allowed=OUTBOUND_MODES,
        ),
        Key(
            "network.existing",
            dict,
            "A landing zone's subnets used instead of a VNet of the stack's own "
            "(docs/access.md); then addressSpace, trainingSubnet, privateEndpointSubnet and "
            "outbound are "
            "not set.",
            default=Computed("none: the stack creates its VNet"),
        ),
        Key(
            "network.existing.trainingSubnetId",
            str,
            "Resource id of the subnet the cluster joins.",
            allowed="a subnet resource id",
            example="/subscriptions/<sub>/resourceGroups/<rg>/providers/"
            "Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>",
        ),
        Key(
            "network.existing.privateEndpointSubnetId",
            str,
            "Resource id of the subnet for the private endpoints, in the same VNet.",
            allowed="a subnet resource id of the training subnet's VNet",
            example="/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/"
            "virtualNetworks/<vnet>/subnets/<subnet>",
        ),
        Key(
            "network.privateDnsZoneIds",
            dict,
            "Existing (central) private DNS zones by zone name: used, "
            "not created. privateEndpoints only.",
            default={},
            allowed="zone name -> private DNS zone resource id; zones: "
            + ", ".join(PRIVATE_DNS_ZONES),
        ),
        Key(
            "network.dnsZoneVnetLinks",
            list,
            "More VNets (a peered hub, a VPN gateway's) linked to the "
            "private DNS zones the stack creates. privateEndpoints only.",
            default=[],
            allowed="virtual network resource ids, each once",
        ),
        Key(
            "network.dnsZoneGroups",
            str,
            "`stack`: each private endpoint gets a DNS zone group that registers it in the "
            "stack's (or network.privateDnsZoneIds') zones. `policy`: no zone group, no zone, "
            "no VNet link; a landing zone's Azure Policy registers the endpoints in its central "
            "zones (docs/access.md). `policy` needs network.existing.",
            default="stack",
            allowed=DNS_ZONE_GROUP_MODES,
        ),
        Key(
            "storage",
            dict,
            "The storage accounts: premium blob for training data, standard "
            "for outputs, optional premium NFS share (infra/storage.py).",
            default={},
        ),
        Key(
            "storage.dataContainer",
            str,
            "Container in the premium block-blob account that holds the training shards.",
            default="training-data",
            allowed="an Azure blob container name",
        ),
        Key(
            "storage.outputsContainer",
            str,
            "Container in the standard account for checkpoints, logs and TensorBoard events.",
            default="outputs",
            allowed="an Azure blob container name",
        ),
        Key(
            "storage.nfsShareGiB",
            int,
            "Size of the premium NFS 4.1 share; 0 means no NFS "
            "account or share (jobs then cannot use the nfs mode).",
            default=0,
            allowed=f"0 or {MIN_NFS_SHARE_GIB}-102400",
            example=100,
        ),
        Key(
            "storage.dataProtection",
            str,
            "What `pulumi destroy` does to the data accounts: "
            "`protect` (destroy refuses them), `retain` (left in Azure, dropped from the "
            "stack) or `none` (deleted with everything else).",
            default="protect",
            allowed=DATA_PROTECTION,
        ),
        Key(
            "storage.outputsProtection",
            str,
            "What `pulumi destroy` does to the outputs account and container (checkpoints, logs, "
            "TensorBoard events): `protect`, `retain` or `none`, as for dataProtection.",
            default=Computed("protect in prod, none otherwise"),
            allowed=DATA_PROTECTION,
        ),
        Key(
            "storage.workspaceStorage",
            str,
            "Networking of the workspace's default storage (outputs "
            "account): `firewall` is Azure ML's GA configuration (shared keys on, firewall "
            "default deny, "
            "a resource-instance rule for the workspace, trusted services); `private` disables "
            "public access (privateEndpoints only); `strict` also disables public "
            "access and shared keys (documented preview).",
            default="firewall",
            allowed=WORKSPACE_STORAGE_MODES,
        ),
        Key(
            "storage.outputsRedundancy",
            str,
            "Replication of the outputs account (checkpoints, logs): `ZRS` and `GZRS` keep "
            "copies in three availability zones (GZRS also in the paired region). Prod "
            "requires ZRS or GZRS; pick GZRS, or a region with zones, where ZRS is not offered.",
            default=Computed("ZRS in prod, LRS otherwise"),
            allowed=OUTPUTS_REDUNDANCY,
        ),
        Key(
            "registry",
            dict,
            "The container registry the training images go to (infra/registry.py).",
            default={},
        ),
        Key(
            "registry.sku",
            str,
            "Premium is required with network.mode privateEndpoints "
            "(only Premium registries take private endpoints).",
            default="Standard",
            allowed=REGISTRY_SKUS,
        ),
        Key("cluster", dict, "The AmlCompute GPU cluster jobs run on (infra/cluster.py)."),
        Key(
            "cluster.name",
            str,
            "AmlCompute name.",
            default="gpu-cluster",
            allowed=f"2-16 letters, digits and hyphens, starting with a letter; not "
            f"{IMAGE_BUILD_COMPUTE!r}",
        ),
        Key(
            "cluster.vmSize",
            str,
            "A GPU size from infra/vm_sizes.yaml.",
            allowed=tuple(sorted(VM_SIZES)),
            example="Standard_NC24ads_A100_v4",
        ),
        Key(
            "cluster.priority",
            str,
            "`lowPriority` is cheaper but can be pre-empted.",
            default="dedicated",
            allowed=tuple(PRIORITIES),
        ),
        Key(
            "cluster.minNodes",
            int,
            "Nodes kept running when idle; 0 scales to zero.",
            default=0,
            allowed="0 to cluster.maxNodes",
        ),
        Key(
            "cluster.maxNodes",
            int,
            "Upper bound on the nodes a job may use.",
            allowed="1 or more",
            example=2,
        ),
        Key(
            "cluster.idleSecondsBeforeScaleDown",
            int,
            "Idle time before a node is released.",
            default=300,
            allowed="60 to 86400",
        ),
        Key(
            "cluster.nodePublicIp",
            bool,
            "true gives each node a public IP for outbound traffic; false (outbound through a NAT "
            "gateway) needs network.mode privateEndpoints, since Azure creates computes without "
            "node public IPs only in a workspace with a private endpoint. Prod requires false.",
            default=Computed("true with serviceEndpoints, false with privateEndpoints"),
            allowed="true or false (false only with privateEndpoints)",
        ),
        Key(
            "imageBuildVmSize",
            str,
            "CPU size of the image-build compute that private stacks "
            "create (their registry is reachable only through the VNet).",
            default="Standard_D4s_v3",
            allowed="a size from infra/vm_sizes.yaml",
        ),
        Key(
            "images",
            dict,
            "Images built elsewhere instead of by the stack (infra/images.py).",
            default={},
        ),
        Key(
            "images.prebuilt",
            dict,
            "Framework -> image ref; those frameworks are not built. "
            "The cluster identity must be able to pull them.",
            default={},
            allowed=f"keys {', '.join(IMAGE_FRAMEWORKS)}; refs pinned by tag (not latest) or "
            "digest",
            example={"tensorflow": "myregistry.azurecr.io/azdl/tensorflow:1.0"},
        ),
        Key(
            "operators",
            list,
            "Microsoft Entra users or groups that get the roles the operator commands "
            "need (docs/access.md).",
            default=[],
        ),
        Key(
            "operators[].objectId",
            str,
            "The user's or group's Entra object id.",
            allowed="a GUID",
            example="00000000-0000-0000-0000-000000000000",
        ),
        Key(
            "operators[].principalType",
            str,
            "What the object id names.",
            allowed=PRINCIPAL_TYPES,
            example="Group",
        ),
        Key("operators[].name", str, "A label for people reading the plan.", default=""),
        Key("access", dict, "How operators reach a private stack (docs/access.md).", default={}),
        Key(
            "access.jumpHost",
            dict,
            "Azure Bastion plus a Linux jump host with Entra ID login in the "
            "stack's VNet; not with network.existing.",
            default=Computed("none: no Bastion, no jump host"),
        ),
        Key(
            "access.jumpHost.bastionSubnet",
            str,
            "AzureBastionSubnet's range.",
            allowed="a /26 or larger inside network.addressSpace, overlapping no other subnet",
            example="10.50.17.0/26",
        ),
        Key(
            "access.jumpHost.jumpHostSubnet",
            str,
            "The jump host's subnet.",
            allowed="a /29 or larger inside network.addressSpace, overlapping no other subnet",
            example="10.50.18.0/29",
        ),
        Key("access.jumpHost.vmSize", str, "The jump host's VM size.", default="Standard_B2s"),
        Key(
            "access.jumpHost.adminUsername",
            str,
            "The break-glass admin's Linux user name.",
            default="azdladmin",
            allowed="a Linux user name Azure does not reserve",
        ),
        Key(
            "access.jumpHost.sshPublicKey",
            str,
            "The break-glass admin's SSH public key (never a private "
            "key); operators sign in with Entra ID.",
            allowed="an ssh-rsa or ssh-ed25519 public key line",
            example="ssh-ed25519 AAAA... admin",
        ),
        Key(
            "access.jumpHost.bastionSku",
            str,
            "Standard allows native-client tunnels (az network bastion ssh).",
            default="Standard",
            allowed=BASTION_SKUS,
        ),
    )
}


def _declared_path(key: str) -> str:
    """A validated key as CONFIG_KEYS spells it: list items `operators[0].objectId` are declared
    once as `operators[].objectId`."""
    return re.sub(r"\[\d+\]", "[]", key)


def _declared(key: str) -> Key:
    """The declaration of a validated key; a key validated but not declared is a bug here."""
    key = _declared_path(key)
    if key not in CONFIG_KEYS:
        raise LookupError(
            f"infra/config.py validates {PROJECT}:{key} but does not declare it in CONFIG_KEYS "
            "(the configuration reference is generated from that table): add a Key(...) for it"
        )
    return CONFIG_KEYS[key]


def _typed(key: str, value: Any, kind: type) -> Any:
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise _fail(key, value, f"must be {TYPE_WORDS[kind]}")
    return value


def _one_of(key: str, value: Any, allowed: tuple[str, ...] | Mapping[str, str]) -> Any:
    declared = CONFIG_KEYS.get(_declared_path(key))
    if declared and isinstance(declared.allowed, tuple) and tuple(allowed) != declared.allowed:
        raise LookupError(
            f"infra/config.py: {PROJECT}:{key} allows {tuple(allowed)} but "
            f"CONFIG_KEYS declares {declared.allowed}"
        )
    if value not in allowed:
        raise _fail(key, value, f"allowed: {', '.join(allowed)}")
    return value


def _vm_size(key: str, name: str) -> VmSize:
    if name not in VM_SIZES:
        raise _fail(key, name, f"a VM size from infra/vm_sizes.yaml: {', '.join(sorted(VM_SIZES))}")
    return VM_SIZES[name]


def _cidr(key: str, value: Any) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(_typed(key, value, str))
    except ValueError as exc:
        raise _fail(key, value, f"an IPv4 CIDR block such as 10.40.0.0/16 ({exc})") from None


def _arm_id(key: str, value: Any, kind: str) -> str:
    pattern, example = ARM_ID_PATTERNS[kind]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _fail(key, value, f"a {kind} resource id, {example}")
    return value


def _firewall_ip_rule(key: str, entry: Any) -> str:
    """One entry of a storage / Key Vault firewall: a public IPv4 address, or a public range of
    /30 or larger. Azure Storage takes no /31 or /32 ranges ("configure these ranges using
    individual IP address rules"; learn.microsoft.com/azure/storage/common/
    storage-network-security#grant-access-from-an-internet-ip-range) nor private ranges."""
    text = _typed(key, entry, str)
    allowed = (
        "a public IPv4 address (e.g. your operator machine's, written without a prefix: "
        "40.74.10.7) or a public range of /30 or larger (40.74.10.0/24); Azure firewalls "
        "take no private ranges and no /31 or /32"
    )
    try:
        net = ipaddress.IPv4Network(text) if "/" in text else ipaddress.IPv4Address(text)
    except ValueError:
        raise _fail(key, entry, allowed) from None
    if not net.is_global or (isinstance(net, ipaddress.IPv4Network) and net.prefixlen > 30):
        raise _fail(key, entry, allowed)
    return text


NETWORK_KEYS = (
    "addressSpace",
    "trainingSubnet",
    "privateEndpointSubnet",
    "mode",
    "publicNetworkAccess",
    "allowedIpRanges",
    "outbound",
    "existing",
    "privateDnsZoneIds",
    "dnsZoneVnetLinks",
    "dnsZoneGroups",
)
ADDRESS_PLAN_KEYS = ("addressSpace", "trainingSubnet", "privateEndpointSubnet")


def _address_plan(s: _Section):
    space = _cidr("network.addressSpace", s.get("addressSpace", str))
    if not space.is_private:
        raise _fail("network.addressSpace", str(space), "a private range (RFC 1918)")
    subnets = {}
    for name in ("trainingSubnet", "privateEndpointSubnet"):
        subnet = _cidr(f"network.{name}", s.get(name, str))
        if not subnet.subnet_of(space):
            raise _fail(
                f"network.{name}", str(subnet), f"a subnet inside network.addressSpace {space}"
            )
        if subnet.prefixlen > 28:
            raise _fail(
                f"network.{name}", str(subnet), "a /28 or larger (Azure reserves 5 addresses)"
            )
        subnets[name] = subnet
    training, endpoints = subnets["trainingSubnet"], subnets["privateEndpointSubnet"]
    if training.overlaps(endpoints):
        raise _fail(
            "network.privateEndpointSubnet",
            str(endpoints),
            f"a range that does not overlap network.trainingSubnet {training}",
        )
    return space, training, endpoints


def _existing_subnets(raw: Any, s: _Section) -> ExistingSubnets:
    """`network.existing`: bring-your-own subnets (the Azure Verified Module for Azure ML
    workspaces, Azure/terraform-azurerm-avm-res-machinelearningservices-workspace, likewise takes
    a subnet resource id per private endpoint instead of creating a network)."""
    for name in (*ADDRESS_PLAN_KEYS, "outbound"):
        if name in s.raw:
            raise _fail(
                f"network.{name}",
                s.raw[name],
                "not set with network.existing: the landing zone owns the existing VNet's "
                "address plan and its subnets' NSG (docs/access.md lists the rules it needs)",
            )
    e = _Section("network.existing", raw, ("trainingSubnetId", "privateEndpointSubnetId"))
    training = _arm_id(
        "network.existing.trainingSubnetId", e.get("trainingSubnetId", str), "subnet"
    )
    endpoints = _arm_id(
        "network.existing.privateEndpointSubnetId", e.get("privateEndpointSubnetId", str), "subnet"
    )
    subnets = ExistingSubnets(training, endpoints)
    if endpoints.rsplit("/subnets/", 1)[0].lower() != subnets.vnet_id.lower():
        raise _fail(
            "network.existing.privateEndpointSubnetId",
            endpoints,
            f"a subnet of the training subnet's VNet ({subnets.vnet_id}): the stack links its "
            "private DNS zones to that one VNet",
        )
    if endpoints.lower() == training.lower():
        raise _fail(
            "network.existing.privateEndpointSubnetId",
            endpoints,
            "a different subnet than network.existing.trainingSubnetId",
        )
    return subnets


def _private_dns(s: _Section, private: bool, own_vnet: str | None):
    zone_ids = s.get("privateDnsZoneIds", dict, {})
    links = s.get("dnsZoneVnetLinks", list, [])
    if (zone_ids or links) and not private:
        key = "network.privateDnsZoneIds" if zone_ids else "network.dnsZoneVnetLinks"
        raise _fail(key, zone_ids or links, "only with network.mode privateEndpoints")
    for zone, zone_id in zone_ids.items():
        key = f"network.privateDnsZoneIds.{zone}"
        _one_of(key, zone, PRIVATE_DNS_ZONES)
        _arm_id(key, zone_id, "private DNS zone")
        if zone_id.rsplit("/", 1)[-1].lower() != zone:
            raise _fail(key, zone_id, f"the id of a private DNS zone named {zone}")
    seen = {own_vnet.lower()} if own_vnet else set()
    for i, vnet in enumerate(links):
        key = f"network.dnsZoneVnetLinks[{i}]"
        _arm_id(key, vnet, "virtual network")
        if vnet.lower() in seen:
            raise _fail(key, vnet, "a VNet not linked already (each VNet once; not the "
                        "stack's own VNet, which is always linked)")  # fmt: skip
        seen.add(vnet.lower())
    if links and set(zone_ids) == set(PRIVATE_DNS_ZONES):
        raise _fail(
            "network.dnsZoneVnetLinks",
            links,
            "empty when every zone is an existing one (network.privateDnsZoneIds): link the "
            "landing zone's central zones to its VNets there",
        )
    return dict(zone_ids), tuple(links)


def _network(raw: Any, environment: str) -> NetworkConfig:
    s = _Section("network", raw, NETWORK_KEYS)
    existing = None
    if "existing" in s.raw:
        existing = _existing_subnets(s.raw["existing"], s)
        space = training = endpoints = None
    else:
        space, training, endpoints = _address_plan(s)
    mode = _one_of("network.mode", s.get("mode", str), NETWORK_MODES)
    public = s.get("publicNetworkAccess", bool, mode == "serviceEndpoints")
    if environment == "prod" and mode != "privateEndpoints":
        raise _fail("network.mode", mode, "a prod stack must use privateEndpoints")
    if environment == "prod" and public:
        raise _fail("network.publicNetworkAccess", public, "a prod stack must set false")
    if mode == "privateEndpoints" and public:
        raise _fail("network.publicNetworkAccess", public, "false with mode privateEndpoints")
    if mode == "serviceEndpoints" and not public:
        raise _fail(
            "network.publicNetworkAccess",
            public,
            "true with mode serviceEndpoints (the firewall then admits the VNet and "
            "allowedIpRanges only); use mode privateEndpoints for no public access",
        )
    ranges = [
        _firewall_ip_rule(f"network.allowedIpRanges[{i}]", entry)
        for i, entry in enumerate(s.get("allowedIpRanges", list, []))
    ]
    if ranges and mode == "privateEndpoints":
        raise _fail(
            "network.allowedIpRanges",
            ranges,
            "empty with mode privateEndpoints (operators reach a private stack from inside "
            "the VNet: access.jumpHost, a peered hub or VPN; docs/access.md)",
        )
    outbound = _one_of("network.outbound", s.get("outbound", str, "restricted"), OUTBOUND_MODES)
    if environment == "prod" and outbound != "restricted":
        raise _fail(
            "network.outbound",
            outbound,
            "a prod stack must set restricted (Azure ML's outbound list, then deny all)",
        )
    zone_ids, links = _private_dns(s, mode == "privateEndpoints", existing and existing.vnet_id)
    zone_groups = _one_of(
        "network.dnsZoneGroups", s.get("dnsZoneGroups", str, "stack"), DNS_ZONE_GROUP_MODES
    )
    if zone_groups == "policy":
        if existing is None:
            raise _fail(
                "network.dnsZoneGroups",
                zone_groups,
                "stack unless network.existing is set: Azure Policy registers endpoints in a "
                "landing zone's central zones, which resolve only in the landing zone's VNets",
            )
        if zone_ids or links:
            key = "network.privateDnsZoneIds" if zone_ids else "network.dnsZoneVnetLinks"
            raise _fail(
                key,
                zone_ids or links,
                "not set with network.dnsZoneGroups: policy (the stack then creates no zone "
                "group, zone or VNet link; the landing zone's policy picks the zones)",
            )
    return NetworkConfig(
        space, training, endpoints, mode, public, tuple(ranges), outbound, existing, zone_ids,
        links, zone_groups,
    )  # fmt: skip


def _storage(raw: Any, environment: str, private: bool) -> StorageConfig:
    s = _Section(
        "storage",
        raw,
        ("dataContainer", "outputsContainer", "nfsShareGiB", "dataProtection",
         "outputsProtection", "workspaceStorage", "outputsRedundancy"),
    )  # fmt: skip
    containers = {}
    for name, default in (("dataContainer", "training-data"), ("outputsContainer", "outputs")):
        value = s.get(name, str, default)
        broken = rule_violation("blob container", value)
        if broken:
            raise _fail(f"storage.{name}", value, broken)
        containers[name] = value
    nfs = s.get("nfsShareGiB", int, 0)
    if nfs != 0 and not MIN_NFS_SHARE_GIB <= nfs <= 102400:
        raise _fail("storage.nfsShareGiB", nfs, f"0 (no NFS share) or {MIN_NFS_SHARE_GIB}-102400")
    protection = _one_of(
        "storage.dataProtection", s.get("dataProtection", str, "protect"), DATA_PROTECTION
    )
    # Checkpoints and logs: kept by `pulumi destroy` by default in prod (docs/deploy.md).
    outputs = _one_of(
        "storage.outputsProtection",
        s.get("outputsProtection", str, "protect" if environment == "prod" else "none"),
        DATA_PROTECTION,
    )
    workspace_storage = _one_of(
        "storage.workspaceStorage",
        s.get("workspaceStorage", str, "firewall"),
        WORKSPACE_STORAGE_MODES,
    )
    if workspace_storage == "private" and not private:
        raise _fail(
            "storage.workspaceStorage",
            workspace_storage,
            "firewall or strict with network.mode serviceEndpoints (private disables the "
            "public endpoint, and only privateEndpoints gives the workspace another way in)",
        )
    redundancy = _one_of(
        "storage.outputsRedundancy",
        s.get("outputsRedundancy", str, "ZRS" if environment == "prod" else "LRS"),
        OUTPUTS_REDUNDANCY,
    )
    if environment == "prod" and redundancy not in ZONE_REDUNDANT:
        raise _fail(
            "storage.outputsRedundancy",
            redundancy,
            f"{' or '.join(ZONE_REDUNDANT)} in a prod stack (checkpoints and logs survive a zone "
            "outage)",
        )
    return StorageConfig(
        containers["dataContainer"],
        containers["outputsContainer"],
        nfs,
        protection,
        outputs,
        workspace_storage,
        redundancy,
    )


def _operators(raw: Any) -> tuple[Operator, ...]:
    """`azdl:operators`: Entra users or groups that get the roles the operator commands need
    (infra/access.py)."""
    if not isinstance(raw, list):
        raise _fail(
            "operators",
            raw,
            "a list of {objectId: <Entra object id>, principalType: User|Group, name: <label>}",
        )
    operators, seen = [], set()
    for i, entry in enumerate(raw):
        s = _Section(f"operators[{i}]", entry, ("objectId", "principalType", "name"))
        object_id = s.get("objectId", str)
        if not re.fullmatch(_GUID, object_id):
            raise _fail(
                f"operators[{i}].objectId",
                object_id,
                "a Microsoft Entra object id, a GUID such as 00000000-0000-0000-0000-000000000000 "
                "(az ad user show --id <upn> --query id; az ad group show -g <name> --query id)",
            )
        if object_id.lower() in seen:
            raise _fail(f"operators[{i}].objectId", object_id, "each operator once")
        seen.add(object_id.lower())
        principal_type = _one_of(
            f"operators[{i}].principalType", s.get("principalType", str), PRINCIPAL_TYPES
        )
        name = s.get("name", str, "")
        operators.append(Operator(object_id.lower(), principal_type, name))
    return tuple(operators)


# Azure's reserved admin user names for Linux VMs (the OSProfile adminUsername rule).
RESERVED_ADMIN_NAMES = frozenset(
    ("administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1",
     "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest",
     "john", "owner", "root", "server", "sql", "support", "support_388945a0", "sys", "test2",
     "test3", "user4", "user5")
)  # fmt: skip
SSH_KEY_TYPES = ("ssh-rsa", "ssh-ed25519")  # what Azure Linux VMs accept


def _jump_host(raw: Any, network: NetworkConfig) -> JumpHostConfig:
    key = "access.jumpHost"
    s = _Section(
        key,
        raw,
        ("bastionSubnet", "jumpHostSubnet", "vmSize", "adminUsername", "sshPublicKey",
         "bastionSku"),
    )  # fmt: skip
    if network.existing is not None:
        raise _fail(
            key,
            raw,
            "not with network.existing: a landing zone reaches the stack from its hub (a "
            "bastion or VPN gateway there, with network.dnsZoneVnetLinks); docs/access.md",
        )
    if not network.private:
        raise _fail(
            key,
            raw,
            "only with network.mode privateEndpoints (with serviceEndpoints the services are "
            "public behind their firewalls: add operators' addresses to network.allowedIpRanges)",
        )
    bastion = _cidr(f"{key}.bastionSubnet", s.get("bastionSubnet", str))
    host = _cidr(f"{key}.jumpHostSubnet", s.get("jumpHostSubnet", str))
    if bastion.prefixlen > 26:
        raise _fail(
            f"{key}.bastionSubnet",
            str(bastion),
            "a /26 or larger (Azure Bastion's AzureBastionSubnet must be at least /26)",
        )
    if host.prefixlen > 29:
        raise _fail(f"{key}.jumpHostSubnet", str(host), "a /29 or larger")
    taken = {
        "network.trainingSubnet": network.training_subnet,
        "network.privateEndpointSubnet": network.endpoint_subnet,
    }
    for name, subnet in ((f"{key}.bastionSubnet", bastion), (f"{key}.jumpHostSubnet", host)):
        if not subnet.subnet_of(network.address_space):
            raise _fail(
                name, str(subnet), f"a subnet inside network.addressSpace {network.address_space}"
            )
        for other_name, other in taken.items():
            if subnet.overlaps(other):
                raise _fail(
                    name, str(subnet), f"a range that does not overlap {other_name} {other}"
                )
        taken[name] = subnet
    vm_size = s.get("vmSize", str, "Standard_B2s")
    if not re.fullmatch(r"Standard_[A-Za-z0-9_]+", vm_size):
        raise _fail(f"{key}.vmSize", vm_size, "an Azure VM size such as Standard_B2s")
    admin = s.get("adminUsername", str, "azdladmin")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", admin) or admin in RESERVED_ADMIN_NAMES:
        raise _fail(
            f"{key}.adminUsername",
            admin,
            "a Linux user name (lowercase letters, digits, '_' or '-', at most 32) that Azure "
            "does not reserve (not admin, root, administrator, user, ...)",
        )
    ssh_key = s.get("sshPublicKey", str).strip()
    if "PRIVATE KEY" in ssh_key:
        raise _fail(
            f"{key}.sshPublicKey",
            "<a private key: not shown>",
            "the PUBLIC key (the .pub file); a private key must never be in a stack file",
        )
    parts = ssh_key.split()
    base64_body = len(parts) >= 2 and re.fullmatch(r"[A-Za-z0-9+/=]+", parts[1])
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES or not base64_body:
        raise _fail(
            f"{key}.sshPublicKey",
            ssh_key[:40] + ("…" if len(ssh_key) > 40 else ""),
            f"an OpenSSH public key line starting with {' or '.join(SSH_KEY_TYPES)}",
        )
    sku = _one_of(f"{key}.bastionSku", s.get("bastionSku", str, "Standard"), BASTION_SKUS)
    return JumpHostConfig(bastion, host, vm_size, admin, ssh_key, sku)


def _access(raw: Any, network: NetworkConfig) -> JumpHostConfig | None:
    s = _Section("access", raw, ("jumpHost",))
    if "jumpHost" not in s.raw:
        return None
    return _jump_host(s.raw["jumpHost"], network)


def _cluster(raw: Any, environment: str, network: NetworkConfig) -> ClusterConfig:
    s = _Section(
        "cluster",
        raw,
        (
            "name",
            "vmSize",
            "priority",
            "minNodes",
            "maxNodes",
            "idleSecondsBeforeScaleDown",
            "nodePublicIp",
        ),
    )
    name = s.get("name", str, "gpu-cluster")
    broken = rule_violation("compute", name)
    if broken:
        raise _fail("cluster.name", name, broken)
    if name == IMAGE_BUILD_COMPUTE:
        raise _fail(
            "cluster.name",
            name,
            f"any other compute name: {IMAGE_BUILD_COMPUTE!r} is the image-build compute that "
            "private (prod) stacks create in the same workspace",
        )
    vm_size = _vm_size("cluster.vmSize", s.get("vmSize", str))
    priority = _one_of("cluster.priority", s.get("priority", str, "dedicated"), PRIORITIES)
    max_nodes = s.get("maxNodes", int)
    if max_nodes < 1:
        raise _fail("cluster.maxNodes", max_nodes, "at least 1")
    min_nodes = s.get("minNodes", int, 0)
    if min_nodes < 0 or min_nodes > max_nodes:
        raise _fail("cluster.minNodes", min_nodes, f"0 to cluster.maxNodes ({max_nodes})")
    idle = s.get("idleSecondsBeforeScaleDown", int, 300)
    if not 60 <= idle <= 86400:
        raise _fail("cluster.idleSecondsBeforeScaleDown", idle, "60 to 86400 seconds")
    public_ip = s.get("nodePublicIp", bool, not network.private)
    if environment == "prod" and public_ip:
        raise _fail("cluster.nodePublicIp", public_ip, "a prod stack must set false")
    if not public_ip and not network.private:
        # Azure: "Provided EnableNodePublicIp 'False' requires workspace private endpoint"
        # (learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet).
        raise _fail(
            "cluster.nodePublicIp",
            public_ip,
            "true with network.mode serviceEndpoints: Azure creates a compute without node "
            "public IPs only in a workspace with a private endpoint (use network.mode "
            "privateEndpoints for nodes without public IPs)",
        )
    return ClusterConfig(name, vm_size, PRIORITIES[priority], min_nodes, max_nodes, idle, public_ip)


def _tags(raw: Any, environment: str) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise _fail("tags", raw, f"an object with at least the keys {', '.join(REQUIRED_TAGS)}")
    for required in REQUIRED_TAGS:
        if required not in raw:
            raise ConfigError(
                f"{PROJECT}:tags.{required} is required but missing "
                f"(required tags: {', '.join(REQUIRED_TAGS)})"
            )
    for name, value in raw.items():
        if not isinstance(value, str) or not value.strip():
            raise _fail(f"tags.{name}", value, "a non-empty string")
    if raw["environment"] != environment:
        raise _fail(
            "tags.environment", raw["environment"], f"the stack's environment ({environment!r})"
        )
    return dict(raw)


def _names(
    project: str, stack: str, prefix: str, cluster: str, subscription: str | None, suffix: Any
) -> Names:
    if suffix is not None and not (
        isinstance(suffix, str) and re.fullmatch(r"[a-z0-9]{4,12}", suffix)
    ):
        raise _fail(
            "nameSuffix",
            suffix,
            "4-12 lowercase letters and digits (it ends the storage, registry and Key Vault "
            "names); leave it unset to derive one from the subscription",
        )
    if not re.fullmatch(r"[a-z][a-z0-9]*", prefix):
        raise _fail(
            "namePrefix",
            prefix,
            "lowercase letters and digits, starting with a letter "
            "(it is part of storage account names)",
        )
    names = derive_names(project, stack, prefix, cluster, subscription, suffix)
    for field, kind in KINDS.items():
        name = getattr(names, field)
        broken = rule_violation(kind, name)
        if broken:
            with_suffix = f"with azdl:nameSuffix {suffix!r}, " if suffix else ""
            raise _fail(
                "namePrefix",
                prefix,
                f"{with_suffix}it makes the {kind} name {name!r}, which breaks Azure's rule: "
                f"{broken}",
            )
    return names


def _prebuilt_images(raw: Any) -> dict[str, str]:
    """`azdl:images.prebuilt`: framework -> an image ref pinned by tag (not latest) or digest."""
    prebuilt = _Section("images", raw, ("prebuilt",)).get("prebuilt", dict, {})
    for framework, ref in prebuilt.items():
        key = f"images.prebuilt.{framework}"
        _one_of(key, framework, IMAGE_FRAMEWORKS)
        pattern = r"[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+(:[\w.-]+)?(@sha256:[0-9a-f]{64})?"
        match = re.fullmatch(pattern, ref) if isinstance(ref, str) else None
        if not match or not (match.group(2) or match.group(3)):
            raise _fail(
                key,
                ref,
                "an image ref with registry, tag or digest, e.g. "
                "myregistry.azurecr.io/azdl/tensorflow:1.0 or …@sha256:<64 hex>",
            )
        if match.group(2) == ":latest" and not match.group(3):
            raise _fail(key, ref, "a pinned tag or digest, not :latest")
    return dict(prebuilt)


def _check_top_level_declared() -> None:
    declared = tuple(k for k in CONFIG_KEYS if "." not in k)
    required = tuple(k for k in declared if isinstance(CONFIG_KEYS[k].default, Required))
    if sorted(declared) != sorted(KEYS) or sorted(required) != sorted(REQUIRED_KEYS):
        raise LookupError(
            f"infra/config.py: KEYS {sorted(KEYS)} / REQUIRED_KEYS {sorted(REQUIRED_KEYS)} differ "
            f"from CONFIG_KEYS' top-level keys {sorted(declared)} / required {sorted(required)}"
        )


# The azure-native provider's own region key: a Pulumi habit, but azdl reads azdl:location.
PROVIDER_LOCATION_KEY = "azure-native:location"


def load_config(
    values: Mapping[str, Any],
    *,
    stack: str,
    project: str = PROJECT,
    subscription_id: str | None = None,
) -> StackConfig:
    """Validate a stack's settings. Keys may carry the `azdl:` namespace (as in stack files);
    keys of other namespaces are ignored, except that `azure-native:location` must not stand
    in for, or contradict, `azdl:location`.

    `subscription_id` is the subscription the stack deploys to (the program reads it from
    Azure): the global names' suffix derives from it. Without it (validating a stack file
    offline) the suffix is a placeholder of the same length; see `with_subscription`."""
    own = {}
    for key, value in values.items():
        namespace, _, bare = key.rpartition(":")
        if namespace in ("", project):
            own[bare] = value
    provider_location = values.get(PROVIDER_LOCATION_KEY)
    if provider_location is not None and "location" not in own:
        raise ConfigError(
            f"{PROJECT}:location is required but missing; the stack sets {PROVIDER_LOCATION_KEY} "
            f"= {provider_location!r}, the azure-native provider's default region, which azdl "
            f"does not read: set {PROJECT}:location: {provider_location} instead "
            f"(`pulumi config set {PROJECT}:location {provider_location}`)"
        )
    if provider_location is not None and provider_location != own["location"]:
        raise _fail(
            "location",
            own["location"],
            f"the same region as {PROVIDER_LOCATION_KEY} ({provider_location!r}), or remove "
            f"{PROVIDER_LOCATION_KEY}: azdl creates every resource in {PROJECT}:location",
        )
    _check_top_level_declared()
    for key in sorted(own):
        section, dot, _ = key.partition(".")
        if dot and section in OBJECT_KEYS:
            raise _fail(
                key,
                own[key],
                f"a flat key; {section} is an object, so set its sub-keys with --path: "
                f"`pulumi config set --path '{PROJECT}:{key}' <value>` (and remove the flat "
                f"`{PROJECT}:{key}` with `pulumi config rm '{PROJECT}:{key}'`)",
            )
        if key not in KEYS:
            raise _fail(key, own[key], f"unknown key; known: {', '.join(KEYS)}")
    for key in REQUIRED_KEYS:
        if key not in own:
            raise ConfigError(f"{PROJECT}:{key} is required but missing")
    environment = _one_of(
        "environment", _typed("environment", own["environment"], str), ENVIRONMENTS
    )
    location = _typed("location", own["location"], str)
    if not re.fullmatch(r"[a-z][a-z0-9]+", location):
        raise _fail("location", location, "an Azure region's programmatic name, e.g. westeurope")
    budget = _typed("maxGpuSpendPerHourUsd", own["maxGpuSpendPerHourUsd"], float)
    if budget <= 0:
        raise _fail("maxGpuSpendPerHourUsd", budget, "a positive number of US dollars per hour")
    network = _network(own["network"], environment)
    registry = _Section("registry", own.get("registry", {}), ("sku",))
    registry_sku = _one_of("registry.sku", registry.get("sku", str, "Standard"), REGISTRY_SKUS)
    if network.private and registry_sku != "Premium":
        raise _fail(
            "registry.sku",
            registry_sku,
            "Premium with network.mode privateEndpoints (only Premium registries take "
            "private endpoints)",
        )
    cluster = _cluster(own["cluster"], environment, network)
    prefix = _typed("namePrefix", own["namePrefix"], str)
    suffix = own.get("nameSuffix")
    return StackConfig(
        project=project,
        stack=stack,
        environment=environment,
        location=location,
        name_prefix=prefix,
        tags=_tags(own["tags"], environment),
        max_gpu_spend_per_hour_usd=budget,
        network=network,
        storage=_storage(own.get("storage", {}), environment, network.private),
        registry_sku=registry_sku,
        cluster=cluster,
        image_build_vm_size=_vm_size(
            "imageBuildVmSize",
            _typed("imageBuildVmSize", own.get("imageBuildVmSize", "Standard_D4s_v3"), str),
        ),
        names=_names(project, stack, prefix, cluster.name, subscription_id, suffix),
        subscription_id=subscription_id,
        name_suffix=suffix,
        prebuilt_images=_prebuilt_images(own.get("images", {})),
        operators=_operators(own.get("operators", [])),
        jump_host=_access(own.get("access", {}), network),
    )


def with_subscription(cfg: StackConfig, subscription_id: str) -> StackConfig:
    """`cfg` for the subscription it deploys to: the global names get their final suffix."""
    names = derive_names(
        cfg.project, cfg.stack, cfg.name_prefix, cfg.cluster.name, subscription_id,
        cfg.name_suffix,
    )  # fmt: skip
    return replace(cfg, names=names, subscription_id=subscription_id)


def stack_name_of(path: Path) -> str:
    """`stacks/Pulumi.dev.yaml` -> `dev`."""
    match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
    if not match:
        raise ConfigError(f"{path}: a stack file is named Pulumi.<stack>.yaml")
    return match.group(1)


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a Pulumi stack file."""
    document = yaml.safe_load(Path(path).read_text()) or {}
    config = document.get("config", {})
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path}: `config:` must be a mapping of keys to values")
    return dict(config)


def load_stack_file(path: Path, subscription_id: str | None = None) -> StackConfig:
    """Validate `stacks/Pulumi.<stack>.yaml` without Pulumi (names for `subscription_id`)."""
    path = Path(path)
    return load_config(
        read_stack_file(path), stack=stack_name_of(path), subscription_id=subscription_id
    )
