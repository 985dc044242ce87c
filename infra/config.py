"""The stack's configuration: every `azdl:` setting declared once, as a typed pydantic model.

`load_config(values, stack=...)` turns the `azdl:*` keys of a stack (as Pulumi hands them
over, or as read from `stacks/Pulumi.<stack>.yaml` by `load_stack_file`) into one frozen
`StackConfig`. Every problem raises `ConfigError` with the key, the bad value and what is
allowed. Pure Python (no Pulumi import) so the CLI can validate a stack file cheaply.

From the models below come the validation, the configuration reference (docs/configuration.md,
through `infra.config_schema.reference_rows`), the stack files' JSON Schema
(`stacks/azdl.schema.json`) and the typed declarations in `Pulumi.yaml`.

How to add a setting (one place):
1. Add a field to the section's model (`NetworkSettings`, `StorageSettings`, `ClusterSettings`,
   ..., or `StackConfig` for a top-level key), declared with `setting(...)`: the description,
   the default (`REQUIRED`, a value, `default_words=` for one derived from other keys,
   `by_environment=` for one per environment), `allowed=` (the rule in words) and `source=`
   (where the rule comes from). The field's name is snake_case; the stack key is its camelCase.
2. Give it a type: `Str`, `Int`, `Float`, `Bool`, `one_of(...)` for choices, `Cidr`,
   `VmSizeName`, `matching(pattern, allowed)`, `azure_name(kind)`, `arm_id(kind)`, or
   `Annotated[Int, rule(lambda n: n >= 1, "at least 1")]` for a rule of its own (a longer
   check is a function that raises `Invalid(value, allowed)`).
   A rule across keys goes in the model's `model_validator` (or, across sections, a
   `field_validator` of `StackConfig` that reads the earlier section from `info.data`).
3. Run `python -m infra.config_schema` (rewrites the schema and Pulumi.yaml's declarations);
   the docs page regenerates itself.
"""

import ipaddress
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from infra.azure_facts import REQUIRED_TAGS
from infra.catalogue import VM_SIZES, VmSize
from infra.naming import IMAGE_BUILD_COMPUTE, KINDS, Names, derive_names, rule_violation

PROJECT = "azdl"
ENVIRONMENTS = ("dev", "test", "staging", "prod")
NETWORK_MODES = ("serviceEndpoints", "privateEndpoints")
DATA_PROTECTION = ("protect", "retain", "none")
REGISTRY_SKUS = ("Basic", "Standard", "Premium")
IMAGE_FRAMEWORKS = ("tensorflow", "pytorch")  # images/<framework>/Dockerfile
PRIORITIES = {"dedicated": "Dedicated", "lowPriority": "LowPriority"}
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
_ID_EXAMPLE = "/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Network/"
ARM_ID_PATTERNS = {  # kind -> (pattern, an example) for resource ids a stack may name
    "subnet": (_GROUP + _VNET + r"/subnets/[-\w.]{1,80}",
               _ID_EXAMPLE + "virtualNetworks/<vnet>/subnets/<subnet>"),
    "virtual network": (_GROUP + _VNET, _ID_EXAMPLE + "virtualNetworks/<vnet>"),
    "private DNS zone": (_GROUP + r"Microsoft\.Network/privateDnsZones/[-\w.]+",
                         _ID_EXAMPLE + "privateDnsZones/<zone>"),
}  # fmt: skip
# Azure's reserved admin user names for Linux VMs (the OSProfile adminUsername rule).
RESERVED_ADMIN_NAMES = frozenset(
    ("administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1",
     "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest",
     "john", "owner", "root", "server", "sql", "support", "support_388945a0", "sys", "test2",
     "test3", "user4", "user5")
)  # fmt: skip
SSH_KEY_TYPES = ("ssh-rsa", "ssh-ed25519")  # what Azure Linux VMs accept
# The azure-native provider's own region key: a Pulumi habit, but azdl reads azdl:location.
PROVIDER_LOCATION_KEY = "azure-native:location"


class ConfigError(ValueError):
    """An invalid stack setting; the message names the key, the bad value and what is allowed."""


class Invalid(ValueError):
    """Raised by a check: `value` is not allowed. `at` names a sub-key (or `[i]`) below the
    checked one; the key itself comes from where pydantic met the value."""

    def __init__(self, value: Any, allowed: str, at: str = ""):
        super().__init__(allowed)
        self.value, self.allowed, self.at = value, allowed, at


class Missing(ValueError):
    """Raised by a check: the sub-key `at` is required but missing (`note` says more)."""

    def __init__(self, at: str, note: str = ""):
        super().__init__(at)
        self.at, self.note = at, note


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{PROJECT}:{key} = {value!r} is invalid: {allowed}")


# ---- declaring a setting ---------------------------------------------------------------------
REQUIRED: Any = ...  # the default of a setting that has none


def setting(
    description: str,
    default: Any = REQUIRED,
    *,
    allowed: str | None = None,
    default_words: str | None = None,
    by_environment: Mapping[str, Any] | None = None,
    example: Any = None,
    source: str | None = None,
    alias: str | None = None,
) -> Any:
    """One setting's declaration. `default_words`: a default derived from other keys, in words
    (the field's default is None; a validator fills it in). `by_environment`: a default per
    environment, `{"prod": ..., "*": ...}`, filled in by `_Section`. `example`: a value for the
    reference's `pulumi config set` lines. `source`: where the rule comes from (a URL)."""
    extra = {"x-allowed": allowed, "x-example": example, "x-source": source}
    if by_environment is not None:
        default = None
        extra["x-default-by-environment"] = dict(by_environment)
        default_words = default_words or ", ".join(
            f"{v} {'otherwise' if k == '*' else 'in ' + k}" for k, v in by_environment.items()
        )
    extra["x-default"] = default_words
    if default_words is not None and default is REQUIRED:
        default = None
    fixed = default is not REQUIRED and default_words is None
    return Field(
        default,
        alias=alias,
        description=description,
        validate_default=fixed,
        json_schema_extra={k: v for k, v in extra.items() if v is not None},
    )


def rule(ok: Callable[[Any], Any], allowed: str | Callable[[Any], str], shown=None) -> Any:
    """A check on a value already of its type: where `ok(value)` is false the value is invalid,
    and the message says `allowed` (or `allowed(value)`), showing `shown(value)` if given."""

    def check(value: Any) -> Any:
        if not ok(value):
            words = allowed(value) if callable(allowed) else allowed
            raise Invalid(shown(value) if shown else value, words)
        return value

    return AfterValidator(check)


Str = Annotated[str, Strict()]
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict()]
Bool = Annotated[bool, Strict()]


def one_of(choices: tuple[str, ...] | Mapping[str, str]) -> Any:
    """A string from `choices` (a mapping: its keys, validated to its values)."""

    def check(value: str) -> str:
        if value not in choices:
            raise Invalid(value, f"allowed: {', '.join(choices)}")
        return choices[value] if isinstance(choices, Mapping) else value

    schema = WithJsonSchema({"type": "string", "enum": list(choices)})
    return Annotated[str, Strict(), AfterValidator(check), schema]


def matching(pattern: str, allowed: str) -> Any:
    """A string matching `pattern` in full."""
    schema = WithJsonSchema({"type": "string", "pattern": f"^(?:{pattern})$"})
    return Annotated[str, Strict(), rule(lambda v: re.fullmatch(pattern, v), allowed), schema]


def azure_name(kind: str) -> Any:
    """An Azure name that keeps `kind`'s naming rule (infra/naming.py)."""
    return Annotated[
        Str, rule(lambda v: not rule_violation(kind, v), partial(rule_violation, kind))
    ]


def arm_id(kind: str) -> Any:
    pattern, example = ARM_ID_PATTERNS[kind]

    def check(value: Any) -> str:
        if not isinstance(value, str) or not re.fullmatch(pattern, value, re.IGNORECASE):
            raise Invalid(value, f"a {kind} resource id, {example}")
        return value

    return Annotated[str, BeforeValidator(check), WithJsonSchema({"type": "string"})]


def _to_cidr(value: Any) -> ipaddress.IPv4Network:
    if not isinstance(value, str):
        raise Invalid(value, "must be a string")
    try:
        return ipaddress.IPv4Network(value)
    except ValueError as exc:
        raise Invalid(value, f"an IPv4 CIDR block such as 10.40.0.0/16 ({exc})") from None


Cidr = Annotated[
    ipaddress.IPv4Network,
    BeforeValidator(_to_cidr),
    WithJsonSchema({"type": "string", "pattern": r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$"}),
]


def _to_vm_size(value: Any) -> VmSize:
    if not isinstance(value, str):
        raise Invalid(value, "must be a string")
    if value not in VM_SIZES:
        raise Invalid(value, f"a VM size from infra/vm_sizes.yaml: {', '.join(sorted(VM_SIZES))}")
    return VM_SIZES[value]


VM_SIZE_NAMES = WithJsonSchema({"type": "string", "enum": sorted(VM_SIZES)})
VmSizeName = Annotated[VmSize, BeforeValidator(_to_vm_size), VM_SIZE_NAMES]


def _prefix_of(cidr: int, largest: str) -> Any:
    return rule(lambda net: net.prefixlen <= cidr, largest, shown=str)


class _Section(BaseModel):
    """A structured key: an object of known sub-keys (camelCase of the field names)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, arbitrary_types_allowed=True
    )

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, raw: Any, info: ValidationInfo) -> Any:
        known = [f.alias for f in cls.model_fields.values()]
        if not isinstance(raw, Mapping):
            raise Invalid(raw, f"an object with the keys {', '.join(known)}")
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise Invalid(raw[unknown[0]], f"unknown key; known: {', '.join(known)}", unknown[0])
        for field in cls.model_fields.values():
            if field.is_required() and field.alias not in raw:
                raise Missing(field.alias)
        environment = (info.context or {}).get("environment")
        filled = dict(raw)
        for field in cls.model_fields.values():
            per_env = (field.json_schema_extra or {}).get("x-default-by-environment")
            if per_env and field.alias not in raw:
                filled[field.alias] = per_env.get(environment, per_env["*"])
        return filled


# ---- the sections ----------------------------------------------------------------------------
def _firewall_ip_rule(text: str) -> str:
    """A public IPv4 address, or a public range of /30 or larger: Azure Storage takes no /31 or
    /32 ranges ("configure these ranges using individual IP address rules") nor private ones."""
    allowed = (
        "a public IPv4 address (e.g. your operator machine's, written without a prefix: "
        "40.74.10.7) or a public range of /30 or larger (40.74.10.0/24); Azure firewalls "
        "take no private ranges and no /31 or /32"
    )
    try:
        net = ipaddress.IPv4Network(text) if "/" in text else ipaddress.IPv4Address(text)
    except ValueError:
        raise Invalid(text, allowed) from None
    if not net.is_global or (isinstance(net, ipaddress.IPv4Network) and net.prefixlen > 30):
        raise Invalid(text, allowed)
    return text


def _zone_ids(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise Invalid(raw, "must be an object")
    for zone, zone_id in raw.items():
        if zone not in PRIVATE_DNS_ZONES:
            raise Invalid(zone, f"allowed: {', '.join(PRIVATE_DNS_ZONES)}", zone)
        pattern, example = ARM_ID_PATTERNS["private DNS zone"]
        if not isinstance(zone_id, str) or not re.fullmatch(pattern, zone_id, re.IGNORECASE):
            raise Invalid(zone_id, f"a private DNS zone resource id, {example}", zone)
        if zone_id.rsplit("/", 1)[-1].lower() != zone:
            raise Invalid(zone_id, f"the id of a private DNS zone named {zone}", zone)
    return raw


ZoneIds = Annotated[
    dict[str, str],
    BeforeValidator(_zone_ids),
    WithJsonSchema({
        "type": "object", "additionalProperties": False,
        "properties": {z: {"type": "string"} for z in PRIVATE_DNS_ZONES},
    }),
]  # fmt: skip


class ExistingSubnets(_Section):
    """`network.existing`: a landing zone's subnets, used instead of a VNet of the stack's own
    (the Azure Verified Module for Azure ML workspaces,
    Azure/terraform-azurerm-avm-res-machinelearningservices-workspace, likewise takes a subnet
    resource id per private endpoint instead of creating a network)."""

    training_subnet_id: arm_id("subnet") = setting(
        "Resource id of the subnet the cluster joins.",
        allowed="a subnet resource id",
        example=_ID_EXAMPLE + "virtualNetworks/<vnet>/subnets/<subnet>",
    )
    endpoint_subnet_id: arm_id("subnet") = setting(
        "Resource id of the subnet for the private endpoints, in the same VNet.",
        allowed="a subnet resource id of the training subnet's VNet",
        example=_ID_EXAMPLE + "virtualNetworks/<vnet>/subnets/<subnet>",
        alias="privateEndpointSubnetId",
    )

    @property
    def vnet_id(self) -> str:
        return self.training_subnet_id.rsplit("/subnets/", 1)[0]

    @model_validator(mode="after")
    def _one_vnet_two_subnets(self) -> "ExistingSubnets":
        endpoints = self.endpoint_subnet_id
        if endpoints.rsplit("/subnets/", 1)[0].lower() != self.vnet_id.lower():
            raise Invalid(endpoints, f"a subnet of the training subnet's VNet ({self.vnet_id}): "
                          "the stack links its private DNS zones to that one VNet",
                          "privateEndpointSubnetId")  # fmt: skip
        if endpoints.lower() == self.training_subnet_id.lower():
            raise Invalid(endpoints, "a different subnet than network.existing.trainingSubnetId",
                          "privateEndpointSubnetId")  # fmt: skip
        return self


ADDRESS_PLAN_KEYS = ("addressSpace", "trainingSubnet", "privateEndpointSubnet")


class NetworkSettings(_Section):
    """The VNet, its two subnets and how services are reached (infra/network.py)."""

    address_space: Cidr = setting(
        "The VNet's range; both subnets must lie inside it.",
        default_words="(required without network.existing)",
        allowed="a private (RFC 1918) IPv4 CIDR block",
        example="10.40.0.0/16",
    )
    training_subnet: Cidr = setting(
        "The cluster's subnet; carries the NSG (and the NAT gateway when nodes have no public IP).",
        default_words="(required without network.existing)",
        allowed="a /28 or larger inside addressSpace",
        example="10.40.0.0/20",
    )
    endpoint_subnet: Cidr = setting(
        "Subnet for private endpoints; reserved in serviceEndpoints mode so switching modes "
        "never renumbers the VNet.",
        default_words="(required without network.existing)",
        allowed="a /28 or larger inside addressSpace, not overlapping trainingSubnet",
        example="10.40.16.0/24",
        alias="privateEndpointSubnet",
    )
    mode: one_of(NETWORK_MODES) = setting(
        "`serviceEndpoints`: services keep public endpoints whose firewalls admit only the "
        "training subnet and allowedIpRanges. `privateEndpoints`: no public access; every "
        "service gets a private endpoint and DNS zone (required in prod).",
        example="serviceEndpoints",
    )
    public_network_access: Bool = setting(
        "Must be true with serviceEndpoints and false with privateEndpoints; prod refuses true.",
        default_words="true with serviceEndpoints, else false",
        allowed="true or false",
    )
    allowed_ip_ranges: tuple[Annotated[Str, AfterValidator(_firewall_ip_rule)], ...] = setting(
        "Public IPs/ranges that may reach storage and Key Vault through their firewalls (e.g. "
        "the machine running `azdl data stage`).",
        (),
        allowed="public IPv4 addresses (written without a prefix) or public ranges of /30 or "
        "larger; empty with privateEndpoints",
        example=["40.74.10.7"],
        source="https://learn.microsoft.com/azure/storage/common/storage-network-security"
        "#grant-access-from-an-internet-ip-range",
    )
    outbound: one_of(OUTBOUND_MODES) = setting(
        "`restricted`: the training subnet's NSG allows only the outbound Azure ML documents "
        "for compute clusters, then denies all; `open`: no outbound rule (Azure's default "
        "allows all). Not set with network.existing.",
        "restricted",
    )
    existing: ExistingSubnets = setting(
        "A landing zone's subnets used instead of a VNet of the stack's own (docs/access.md); "
        "then addressSpace, trainingSubnet, privateEndpointSubnet and outbound are not set.",
        default_words="none: the stack creates its VNet",
    )
    private_dns_zone_ids: ZoneIds = setting(
        "Existing (central) private DNS zones by zone name: used, not created. "
        "privateEndpoints only.",
        {},
        allowed="zone name -> private DNS zone resource id; zones: " + ", ".join(PRIVATE_DNS_ZONES),
    )
    dns_zone_vnet_links: tuple[arm_id("virtual network"), ...] = setting(
        "More VNets (a peered hub, a VPN gateway's) linked to the private DNS zones the stack "
        "creates. privateEndpoints only.",
        (),
        allowed="virtual network resource ids, each once",
    )
    dns_zone_groups: one_of(DNS_ZONE_GROUP_MODES) = setting(
        "`stack`: each private endpoint gets a DNS zone group that registers it in the stack's "
        "(or network.privateDnsZoneIds') zones. `policy`: no zone group, no zone, no VNet link; "
        "a landing zone's Azure Policy registers the endpoints in its central zones "
        "(docs/access.md). `policy` needs network.existing.",
        "stack",
        source="https://github.com/Azure/terraform-azurerm-avm-res-machinelearningservices-"
        "workspace/issues/124",
    )

    @property
    def private(self) -> bool:
        return self.mode == "privateEndpoints"

    @property
    def zone_groups_by_policy(self) -> bool:
        return self.dns_zone_groups == "policy"

    @model_validator(mode="before")
    @classmethod
    def _address_plan_or_existing(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping) and "existing" in raw:
            for name in (*ADDRESS_PLAN_KEYS, "outbound"):
                if name in raw:
                    raise Invalid(raw[name], "not set with network.existing: the landing zone "
                                  "owns the existing VNet's address plan and its subnets' NSG "
                                  "(docs/access.md lists the rules it needs)", name)  # fmt: skip
        elif isinstance(raw, Mapping):
            for name in ADDRESS_PLAN_KEYS:
                if name not in raw:
                    raise Missing(name)
        return raw

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> "NetworkSettings":
        if self.existing is None:
            self._check_address_plan()
        mode, environment = self.mode, (info.context or {}).get("environment")
        public = self.public_network_access
        if public is None:
            public = mode == "serviceEndpoints"
            object.__setattr__(self, "public_network_access", public)
        if environment == "prod" and mode != "privateEndpoints":
            raise Invalid(mode, "a prod stack must use privateEndpoints", "mode")
        if environment == "prod" and public:
            raise Invalid(public, "a prod stack must set false", "publicNetworkAccess")
        if mode == "privateEndpoints" and public:
            raise Invalid(public, "false with mode privateEndpoints", "publicNetworkAccess")
        if mode == "serviceEndpoints" and not public:
            raise Invalid(public, "true with mode serviceEndpoints (the firewall then admits "
                          "the VNet and allowedIpRanges only); use mode privateEndpoints for no "
                          "public access", "publicNetworkAccess")  # fmt: skip
        if self.allowed_ip_ranges and self.private:
            raise Invalid(list(self.allowed_ip_ranges), "empty with mode privateEndpoints "
                          "(operators reach a private stack from inside the VNet: "
                          "access.jumpHost, a peered hub or VPN; docs/access.md)",
                          "allowedIpRanges")  # fmt: skip
        if environment == "prod" and self.outbound != "restricted":
            raise Invalid(self.outbound, "a prod stack must set restricted (Azure ML's outbound "
                          "list, then deny all)", "outbound")  # fmt: skip
        self._check_private_dns()
        return self

    def _check_address_plan(self) -> None:
        space = self.address_space
        if not space.is_private:
            raise Invalid(str(space), "a private range (RFC 1918)", "addressSpace")
        for name, subnet in (("trainingSubnet", self.training_subnet),
                             ("privateEndpointSubnet", self.endpoint_subnet)):  # fmt: skip
            if not subnet.subnet_of(space):
                raise Invalid(str(subnet), f"a subnet inside network.addressSpace {space}", name)
            if subnet.prefixlen > 28:
                raise Invalid(str(subnet), "a /28 or larger (Azure reserves 5 addresses)", name)
        if self.training_subnet.overlaps(self.endpoint_subnet):
            raise Invalid(str(self.endpoint_subnet), "a range that does not overlap "
                          f"network.trainingSubnet {self.training_subnet}",
                          "privateEndpointSubnet")  # fmt: skip

    def _check_private_dns(self) -> None:
        zone_ids, links = self.private_dns_zone_ids, self.dns_zone_vnet_links
        if (zone_ids or links) and not self.private:
            key = "privateDnsZoneIds" if zone_ids else "dnsZoneVnetLinks"
            raise Invalid(zone_ids or list(links), "only with network.mode privateEndpoints", key)
        seen = {self.existing.vnet_id.lower()} if self.existing else set()
        for i, vnet in enumerate(links):
            if vnet.lower() in seen:
                raise Invalid(vnet, "a VNet not linked already (each VNet once; not the "
                              "stack's own VNet, which is always linked)",
                              f"dnsZoneVnetLinks[{i}]")  # fmt: skip
            seen.add(vnet.lower())
        if links and set(zone_ids) == set(PRIVATE_DNS_ZONES):
            raise Invalid(list(links), "empty when every zone is an existing one "
                          "(network.privateDnsZoneIds): link the landing zone's central zones "
                          "to its VNets there", "dnsZoneVnetLinks")  # fmt: skip
        if self.zone_groups_by_policy:
            if self.existing is None:
                raise Invalid("policy", "stack unless network.existing is set: Azure Policy "
                              "registers endpoints in a landing zone's central zones, which "
                              "resolve only in the landing zone's VNets",
                              "dnsZoneGroups")  # fmt: skip
            if zone_ids or links:
                key = "privateDnsZoneIds" if zone_ids else "dnsZoneVnetLinks"
                raise Invalid(zone_ids or list(links), "not set with network.dnsZoneGroups: "
                              "policy (the stack then creates no zone group, zone or VNet link; "
                              "the landing zone's policy picks the zones)", key)  # fmt: skip


class StorageSettings(_Section):
    """The storage accounts: premium blob for training data, standard for outputs, optional
    premium NFS share (infra/storage.py)."""

    data_container: azure_name("blob container") = setting(
        "Container in the premium block-blob account that holds the training shards.",
        "training-data",
        allowed="an Azure blob container name",
    )
    outputs_container: azure_name("blob container") = setting(
        "Container in the standard account for checkpoints, logs and TensorBoard events.",
        "outputs",
        allowed="an Azure blob container name",
    )
    nfs_share_gib: Annotated[
        Int,
        rule(
            lambda g: g == 0 or MIN_NFS_SHARE_GIB <= g <= 102400,
            f"0 (no NFS share) or {MIN_NFS_SHARE_GIB}-102400",
        ),
    ] = setting(
        "Size of the premium NFS 4.1 share; 0 means no NFS account or share (jobs then cannot "
        "use the nfs mode).",
        0,
        allowed=f"0 or {MIN_NFS_SHARE_GIB}-102400",
        example=100,
        alias="nfsShareGiB",
    )
    data_protection: one_of(DATA_PROTECTION) = setting(
        "What `pulumi destroy` does to the data accounts: `protect` (destroy refuses them), "
        "`retain` (left in Azure, dropped from the stack) or `none` (deleted with everything "
        "else).",
        "protect",
    )
    # Checkpoints and logs: kept by `pulumi destroy` by default in prod (docs/deploy.md).
    outputs_protection: one_of(DATA_PROTECTION) = setting(
        "What `pulumi destroy` does to the outputs account and container (checkpoints, logs, "
        "TensorBoard events): `protect`, `retain` or `none`, as for dataProtection.",
        by_environment={"prod": "protect", "*": "none"},
    )
    workspace_storage: one_of(WORKSPACE_STORAGE_MODES) = setting(
        "Networking of the workspace's default storage (outputs account): `firewall` is Azure "
        "ML's GA configuration (shared keys on, firewall default deny, a resource-instance "
        "rule for the workspace, trusted services); `private` disables public access "
        "(privateEndpoints only); `strict` also disables public access and shared keys "
        "(documented preview).",
        "firewall",
        source="https://learn.microsoft.com/azure/machine-learning/how-to-disable-local-auth-storage",
    )
    outputs_redundancy: one_of(OUTPUTS_REDUNDANCY) = setting(
        "Replication of the outputs account (checkpoints, logs): `ZRS` and `GZRS` keep copies "
        "in three availability zones (GZRS also in the paired region). Prod requires ZRS or "
        "GZRS; pick GZRS, or a region with zones, where ZRS is not offered.",
        by_environment={"prod": "ZRS", "*": "LRS"},
        source="https://learn.microsoft.com/azure/storage/common/storage-redundancy",
    )

    @property
    def outputs_sku(self) -> str:
        return f"Standard_{self.outputs_redundancy}"

    @model_validator(mode="after")
    def _prod_outputs_zone_redundant(self, info: ValidationInfo) -> "StorageSettings":
        prod = (info.context or {}).get("environment") == "prod"
        if prod and self.outputs_redundancy not in ZONE_REDUNDANT:
            raise Invalid(self.outputs_redundancy, f"{' or '.join(ZONE_REDUNDANT)} in a prod "
                          "stack (checkpoints and logs survive a zone outage)",
                          "outputsRedundancy")  # fmt: skip
        return self


class RegistrySettings(_Section):
    """The container registry the training images go to (infra/registry.py)."""

    sku: one_of(REGISTRY_SKUS) = setting(
        "Premium is required with network.mode privateEndpoints (only Premium registries take "
        "private endpoints).",
        "Standard",
    )


NOT_IMAGE_BUILD = rule(lambda name: name != IMAGE_BUILD_COMPUTE, f"any other compute name: "
                       f"{IMAGE_BUILD_COMPUTE!r} is the image-build compute that private (prod) "
                       "stacks create in the same workspace")  # fmt: skip


class ClusterSettings(_Section):
    """The AmlCompute GPU cluster jobs run on (infra/cluster.py)."""

    name: Annotated[azure_name("compute"), NOT_IMAGE_BUILD] = setting(
        "AmlCompute name.",
        "gpu-cluster",
        allowed=f"2-16 letters, digits and hyphens, starting with a letter; not "
        f"{IMAGE_BUILD_COMPUTE!r}",
    )
    vm_size: VmSizeName = setting(
        "A GPU size from infra/vm_sizes.yaml.", example="Standard_NC24ads_A100_v4"
    )
    priority: one_of(PRIORITIES) = setting(
        "`lowPriority` is cheaper but can be pre-empted.", "dedicated"
    )
    min_nodes: Annotated[Int, rule(lambda n: n >= 0, "0 to cluster.maxNodes")] = setting(
        "Nodes kept running when idle; 0 scales to zero.", 0, allowed="0 to cluster.maxNodes"
    )
    max_nodes: Annotated[Int, rule(lambda n: n >= 1, "at least 1")] = setting(
        "Upper bound on the nodes a job may use.", allowed="1 or more", example=2
    )
    idle_seconds_before_scale_down: Annotated[
        Int, rule(lambda s: 60 <= s <= 86400, "60 to 86400 seconds")
    ] = setting("Idle time before a node is released.", 300, allowed="60 to 86400")
    node_public_ip: Bool = setting(
        "true gives each node a public IP for outbound traffic; false (outbound through a NAT "
        "gateway) needs network.mode privateEndpoints, since Azure creates computes without "
        "node public IPs only in a workspace with a private endpoint. Prod requires false.",
        default_words="true with serviceEndpoints, false with privateEndpoints",
        allowed="true or false (false only with privateEndpoints)",
        source="https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet",
    )

    @model_validator(mode="after")
    def _rules(self) -> "ClusterSettings":
        if self.min_nodes > self.max_nodes:
            raise Invalid(self.min_nodes, f"0 to cluster.maxNodes ({self.max_nodes})", "minNodes")
        return self


def _image_refs(prebuilt: dict[str, str]) -> dict[str, str]:
    """Framework -> an image ref pinned by tag (not latest) or digest."""
    pattern = r"[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+(:[\w.-]+)?(@sha256:[0-9a-f]{64})?"
    for framework, ref in prebuilt.items():
        if framework not in IMAGE_FRAMEWORKS:
            raise Invalid(framework, f"allowed: {', '.join(IMAGE_FRAMEWORKS)}", framework)
        match = re.fullmatch(pattern, ref) if isinstance(ref, str) else None
        if not match or not (match.group(2) or match.group(3)):
            raise Invalid(ref, "an image ref with registry, tag or digest, e.g. "
                          "myregistry.azurecr.io/azdl/tensorflow:1.0 or …@sha256:<64 hex>",
                          framework)  # fmt: skip
        if match.group(2) == ":latest" and not match.group(3):
            raise Invalid(ref, "a pinned tag or digest, not :latest", framework)
    return prebuilt


class ImagesSettings(_Section):
    """Images built elsewhere instead of by the stack (infra/images.py)."""

    prebuilt: Annotated[
        dict[str, Any],
        AfterValidator(_image_refs),
        WithJsonSchema(
            {
                "type": "object",
                "propertyNames": {"enum": list(IMAGE_FRAMEWORKS)},
                "additionalProperties": {"type": "string"},
            }
        ),
    ] = setting(
        "Framework -> image ref; those frameworks are not built. The cluster identity must be "
        "able to pull them.",
        {},
        allowed=f"keys {', '.join(IMAGE_FRAMEWORKS)}; refs pinned by tag (not latest) or digest",
        example={"tensorflow": "myregistry.azurecr.io/azdl/tensorflow:1.0"},
    )


class Operator(_Section):
    """A person or group that runs `azdl data stage`, `azdl submit` and `azdl bench`."""

    object_id: Annotated[matching(_GUID, "a Microsoft Entra object id, a GUID such as "
        "00000000-0000-0000-0000-000000000000 (az ad user show --id <upn> --query id; az ad "
        "group show -g <name> --query id)"), AfterValidator(str.lower)] = setting(
        "The user's or group's Entra object id.",
        allowed="a GUID",
        example="00000000-0000-0000-0000-000000000000",
    )  # fmt: skip
    principal_type: one_of(PRINCIPAL_TYPES) = setting("What the object id names.", example="Group")
    name: Str = setting("A label for people reading the plan.", "")


def _operator_list(raw: Any) -> Any:
    if not isinstance(raw, list):
        raise Invalid(raw, "a list of {objectId: <Entra object id>, principalType: User|Group, "
                      "name: <label>}")  # fmt: skip
    return raw


def _each_operator_once(operators: tuple[Operator, ...]) -> tuple[Operator, ...]:
    seen = set()
    for i, operator in enumerate(operators):
        if operator.object_id in seen:
            raise Invalid(operator.object_id, "each operator once", f"[{i}].objectId")
        seen.add(operator.object_id)
    return operators


def _ssh_public_key(text: str) -> str:
    key = text.strip()
    if "PRIVATE KEY" in key:
        raise Invalid("<a private key: not shown>", "the PUBLIC key (the .pub file); a private "
                      "key must never be in a stack file")  # fmt: skip
    parts = key.split()
    base64_body = len(parts) >= 2 and re.fullmatch(r"[A-Za-z0-9+/=]+", parts[1])
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES or not base64_body:
        raise Invalid(key[:40] + ("…" if len(key) > 40 else ""), "an OpenSSH public key line "
                      f"starting with {' or '.join(SSH_KEY_TYPES)}")  # fmt: skip
    return key


class JumpHostConfig(_Section):
    """`access.jumpHost`: Azure Bastion plus a small Linux VM inside the stack's VNet."""

    bastion_subnet: Annotated[Cidr, _prefix_of(26, "a /26 or larger (Azure Bastion's "
        "AzureBastionSubnet must be at least /26)")] = setting(
        "AzureBastionSubnet's range.",
        allowed="a /26 or larger inside network.addressSpace, overlapping no other subnet",
        example="10.50.17.0/26",
    )  # fmt: skip
    jump_host_subnet: Annotated[Cidr, _prefix_of(29, "a /29 or larger")] = setting(
        "The jump host's subnet.",
        allowed="a /29 or larger inside network.addressSpace, overlapping no other subnet",
        example="10.50.18.0/29",
    )
    vm_size: matching(r"Standard_[A-Za-z0-9_]+", "an Azure VM size such as Standard_B2s") = setting(
        "The jump host's VM size.", "Standard_B2s"
    )
    admin_username: Annotated[
        Str,
        rule(
            lambda name: (
                re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name) and name not in RESERVED_ADMIN_NAMES
            ),
            "a Linux user name (lowercase letters, digits, '_' or '-', at most 32) that Azure does "
            "not reserve (not admin, root, administrator, user, ...)",
        ),
    ] = setting(
        "The break-glass admin's Linux user name.",
        "azdladmin",
        allowed="a Linux user name Azure does not reserve",
    )
    ssh_public_key: Annotated[Str, AfterValidator(_ssh_public_key)] = setting(
        "The break-glass admin's SSH public key (never a private key); operators sign in with "
        "Entra ID.",
        allowed="an ssh-rsa or ssh-ed25519 public key line",
        example="ssh-ed25519 AAAA... admin",
    )
    bastion_sku: one_of(BASTION_SKUS) = setting(
        "Standard allows native-client tunnels (az network bastion ssh).", "Standard"
    )


class AccessSettings(_Section):
    """How operators reach a private stack (docs/access.md)."""

    jump_host: JumpHostConfig = setting(
        "Azure Bastion plus a Linux jump host with Entra ID login in the stack's VNet; not with "
        "network.existing.",
        default_words="none: no Bastion, no jump host",
    )


def _tags(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise Invalid(raw, f"an object with at least the keys {', '.join(REQUIRED_TAGS)}")
    for required in REQUIRED_TAGS:
        if required not in raw:
            raise Missing(required, f" (required tags: {', '.join(REQUIRED_TAGS)})")
    for name, value in raw.items():
        if not isinstance(value, str) or not value.strip():
            raise Invalid(value, "a non-empty string", name)
    return raw


Tags = Annotated[
    dict[str, str],
    BeforeValidator(_tags),
    WithJsonSchema({"type": "object", "required": list(REQUIRED_TAGS),
                    "additionalProperties": {"type": "string", "minLength": 1}}),
]  # fmt: skip


Region = matching(r"[a-z][a-z0-9]+", "an Azure region's programmatic name, e.g. westeurope")
NamePrefix = matching(
    r"[a-z][a-z0-9]*",
    "lowercase letters and digits, starting with a letter (it is part of storage account names)",
)
NameSuffix = matching(r"[a-z0-9]{4,12}", "4-12 lowercase letters and digits (it ends the storage, "
                       "registry and Key Vault names); leave it unset to derive one from the "
                       "subscription")  # fmt: skip


# ---- the stack --------------------------------------------------------------------------------
class StackConfig(_Section):
    """Every `azdl:` key of a stack, validated; plus the stack's names (`names`), which derive
    from the project, stack and subscription (`load_config`'s context)."""

    environment: one_of(ENVIRONMENTS) = setting(
        "Only `prod` enforces private networking (network.mode privateEndpoints, no public "
        "access, no node public IPs, Premium registry).",
        example="dev",
    )
    location: Region = setting(
        "Azure region (programmatic name); everything is created here. It needs GPU quota for "
        "`cluster.vmSize` x `cluster.maxNodes`.",
        allowed="an Azure region's programmatic name, e.g. westeurope",
        example="westeurope",
    )  # fmt: skip
    name_prefix: NamePrefix = setting(
        "Every Azure name derives from it (resource group `<prefix>-rg`, storage "
        "`<prefix>data<6 hex>`); it must keep every derived name within Azure's rules, so keep "
        "it short.",
        allowed="lowercase letters and digits, starting with a letter",
        example="azdldev",
    )  # fmt: skip
    name_suffix: NameSuffix | None = setting(
        "Pins the 6-hex suffix of the globally unique names (storage accounts, registry, Key "
        "Vault). Unset: hashed from project, stack, subscription and resource group, so the "
        "same stack in another subscription gets other names (docs/deploy.md, Names).",
        default_words="hashed from the subscription and resource group",
        allowed="4-12 lowercase letters and digits",
        example="team42",
    )  # fmt: skip
    tags: Tags = setting(
        "Tags on every taggable resource. Extra tags are allowed; `tags.environment` must equal "
        "`environment`.",
        allowed="an object with at least " + ", ".join(REQUIRED_TAGS) + " (non-empty strings)",
        example={"environment": "dev", "project": "azdl", "owner": "ml-platform",
                 "costCenter": "cc-ml-0001"},
    )  # fmt: skip
    max_gpu_spend_per_hour_usd: Annotated[
        Float, rule(lambda usd: usd > 0, "a positive number of US dollars per hour")
    ] = setting(
        "GPU spend ceiling in USD per hour for the whole cluster at maxNodes; `azdl plan` and "
        "the policies compare the cluster's price against it.",
        allowed="a positive number",
        example=10,
        alias="maxGpuSpendPerHourUsd",
    )
    network: NetworkSettings = setting(NetworkSettings.__doc__)
    storage: StorageSettings = setting(StorageSettings.__doc__, {})
    registry: RegistrySettings = setting(RegistrySettings.__doc__, {})
    cluster: ClusterSettings = setting(ClusterSettings.__doc__)
    image_build_vm_size: VmSizeName = setting(
        "CPU size of the image-build compute that private stacks create (their registry is "
        "reachable only through the VNet).",
        "Standard_D4s_v3",
        allowed="a size from infra/vm_sizes.yaml",
    )
    images: ImagesSettings = setting(ImagesSettings.__doc__, {})
    operators: Annotated[tuple[Operator, ...], BeforeValidator(_operator_list),
                         AfterValidator(_each_operator_once)] = setting(
        "Microsoft Entra users or groups that get the roles the operator commands need "
        "(docs/access.md).",
        [],
    )  # fmt: skip
    access: AccessSettings = setting(AccessSettings.__doc__, {})

    _project: str = PrivateAttr(PROJECT)
    _stack: str = PrivateAttr("")
    _subscription_id: str | None = PrivateAttr(None)
    _names: Names | None = PrivateAttr(None)

    # -- cross-section rules: each reads the sections validated before it (field order) --
    @field_validator("tags")
    @classmethod
    def _tags_name_the_environment(cls, tags: dict[str, str], info: ValidationInfo) -> dict:
        environment = info.data.get("environment")
        if environment and tags["environment"] != environment:
            raise Invalid(tags["environment"], f"the stack's environment ({environment!r})",
                          "environment")  # fmt: skip
        return tags

    @field_validator("storage")
    @classmethod
    def _private_storage_needs_private_endpoints(cls, storage, info: ValidationInfo):
        network = info.data.get("network")
        if network and storage.workspace_storage == "private" and not network.private:
            raise Invalid("private", "firewall or strict with network.mode serviceEndpoints "
                          "(private disables the public endpoint, and only privateEndpoints "
                          "gives the workspace another way in)", "workspaceStorage")  # fmt: skip
        return storage

    @field_validator("registry")
    @classmethod
    def _private_endpoints_need_premium(cls, registry, info: ValidationInfo):
        network = info.data.get("network")
        if network and network.private and registry.sku != "Premium":
            raise Invalid(registry.sku, "Premium with network.mode privateEndpoints (only "
                          "Premium registries take private endpoints)", "sku")  # fmt: skip
        return registry

    @field_validator("cluster")
    @classmethod
    def _node_public_ip(cls, cluster: ClusterSettings, info: ValidationInfo):
        network = info.data.get("network")
        if network is None:
            return cluster
        public_ip = cluster.node_public_ip
        if public_ip is None:
            public_ip = not network.private
            object.__setattr__(cluster, "node_public_ip", public_ip)
        if info.data.get("environment") == "prod" and public_ip:
            raise Invalid(public_ip, "a prod stack must set false", "nodePublicIp")
        if not public_ip and not network.private:
            # Azure: "Provided EnableNodePublicIp 'False' requires workspace private endpoint"
            # (learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet).
            raise Invalid(public_ip, "true with network.mode serviceEndpoints: Azure creates a "
                          "compute without node public IPs only in a workspace with a private "
                          "endpoint (use network.mode privateEndpoints for nodes without public "
                          "IPs)", "nodePublicIp")  # fmt: skip
        return cluster

    @field_validator("access")
    @classmethod
    def _jump_host_in_own_private_vnet(cls, access: AccessSettings, info: ValidationInfo):
        network, host = info.data.get("network"), access.jump_host
        if network is None or host is None:
            return access
        raw = host.model_dump(mode="json", by_alias=True)
        if network.existing is not None:
            raise Invalid(raw, "not with network.existing: a landing zone reaches the stack from "
                          "its hub (a bastion or VPN gateway there, with "
                          "network.dnsZoneVnetLinks); docs/access.md", "jumpHost")  # fmt: skip
        if not network.private:
            raise Invalid(raw, "only with network.mode privateEndpoints (with serviceEndpoints "
                          "the services are public behind their firewalls: add operators' "
                          "addresses to network.allowedIpRanges)", "jumpHost")  # fmt: skip
        taken = {"network.trainingSubnet": network.training_subnet,
                 "network.privateEndpointSubnet": network.endpoint_subnet}  # fmt: skip
        for name, subnet in (("bastionSubnet", host.bastion_subnet),
                             ("jumpHostSubnet", host.jump_host_subnet)):  # fmt: skip
            if not subnet.subnet_of(network.address_space):
                raise Invalid(str(subnet), "a subnet inside network.addressSpace "
                              f"{network.address_space}", f"jumpHost.{name}")  # fmt: skip
            for other_name, other in taken.items():
                if subnet.overlaps(other):
                    raise Invalid(str(subnet), f"a range that does not overlap {other_name} "
                                  f"{other}", f"jumpHost.{name}")  # fmt: skip
            taken[f"access.jumpHost.{name}"] = subnet
        return access

    @model_validator(mode="after")
    def _names_keep_azure_rules(self, info: ValidationInfo) -> "StackConfig":
        context = info.context or {}
        self._project = context.get("project", PROJECT)
        self._stack = context.get("stack", "")
        self._subscription_id = context.get("subscription_id")
        self._names = self._derive_names()
        suffix = self.name_suffix
        for field, kind in KINDS.items():
            name = getattr(self._names, field)
            broken = rule_violation(kind, name)
            if broken:
                with_suffix = f"with azdl:nameSuffix {suffix!r}, " if suffix else ""
                raise Invalid(self.name_prefix, f"{with_suffix}it makes the {kind} name "
                              f"{name!r}, which breaks Azure's rule: {broken}",
                              "namePrefix")  # fmt: skip
        return self

    def _derive_names(self) -> Names:
        return derive_names(self._project, self._stack, self.name_prefix, self.cluster.name,
                            self._subscription_id, self.name_suffix)  # fmt: skip

    # -- what the program reads besides the settings --
    project = property(lambda self: self._project)
    stack = property(lambda self: self._stack)
    subscription_id = property(lambda self: self._subscription_id)  # None: not known yet
    names = property(lambda self: self._names)
    registry_sku = property(lambda self: self.registry.sku)
    prebuilt_images = property(lambda self: self.images.prebuilt)  # framework -> image ref
    jump_host = property(lambda self: self.access.jump_host)


# ---- the settings as Pulumi and the stack files name them -----------------------------------
def json_type(schema: Mapping[str, Any]) -> str | None:
    """A property's JSON type ("string", "object", ...; a nullable one's non-null type)."""
    types = [s.get("type") for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    return "object" if not types or types[0] is None else types[0]


SCHEMA = StackConfig.model_json_schema(by_alias=True)
KEYS = tuple(f.alias for f in StackConfig.model_fields.values())
# Passed by Pulumi as they are; every other key holds YAML/JSON structure.
STRING_KEYS = tuple(k for k in KEYS if json_type(SCHEMA["properties"][k]) == "string")
OBJECT_KEYS = tuple(k for k in KEYS if k not in STRING_KEYS)


def _key_of(loc: tuple[Any, ...], at: str = "") -> str:
    key = ""
    for part in (*loc, *([at] if at else [])):
        part = f"[{part}]" if isinstance(part, int) else str(part)
        key += part if not key or part.startswith("[") else f".{part}"
    return key


TYPE_WORDS = {"string_type": "a string", "int_type": "an integer", "float_type": "a number",
              "bool_type": "true or false", "tuple_type": "a list", "list_type": "a list",
              "dict_type": "an object"}  # fmt: skip


def _config_error(exc: ValidationError) -> ConfigError:
    """The first problem pydantic found, in the project's words."""
    error = exc.errors()[0]
    key, cause = _key_of(error["loc"]), error.get("ctx", {}).get("error")
    if isinstance(cause, Invalid):
        return _fail(_key_of(error["loc"], cause.at), cause.value, cause.allowed)
    if isinstance(cause, Missing):
        key = _key_of(error["loc"], cause.at)
        return ConfigError(f"{PROJECT}:{key} is required but missing{cause.note}")
    if error["type"] == "missing":
        return ConfigError(f"{PROJECT}:{key} is required but missing")
    if error["type"] in TYPE_WORDS:
        return _fail(key, error["input"], f"must be {TYPE_WORDS[error['type']]}")
    return _fail(key, error["input"], error["msg"])  # a check without words of its own


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
    context = {"project": project, "stack": stack, "subscription_id": subscription_id,
               "environment": own.get("environment")}  # fmt: skip
    try:
        return StackConfig.model_validate(own, context=context)
    except ValidationError as exc:
        raise _config_error(exc) from None


def with_subscription(cfg: StackConfig, subscription_id: str) -> StackConfig:
    """`cfg` for the subscription it deploys to: the global names get their final suffix."""
    copy = cfg.model_copy()
    copy._subscription_id = subscription_id
    copy._names = copy._derive_names()
    return copy


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
