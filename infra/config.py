"""The stack's configuration: read and validated in one place, before any resource exists.

`load_config(values, stack=...)` turns the `azdl:*` keys of a stack (as Pulumi hands them
over, or as read from `stacks/Pulumi.<stack>.yaml` by `load_stack_file`) into one frozen
`StackConfig`. Every problem raises `ConfigError` with the key, the bad value and what is
allowed. Pure Python (no Pulumi import) so the CLI can validate a stack file cheaply.
"""

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
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

# Top-level keys (without the `azdl:` namespace). String-valued keys are passed through as
# they are; every other key holds YAML/JSON structure.
STRING_KEYS = ("environment", "location", "namePrefix", "imageBuildVmSize")
OBJECT_KEYS = ("tags", "maxGpuSpendPerHourUsd", "network", "storage", "registry", "cluster")
OBJECT_KEYS += ("images",)  # prebuilt image refs instead of building them (infra/images.py)
KEYS = STRING_KEYS + OBJECT_KEYS
REQUIRED_KEYS = ("environment", "location", "namePrefix", "tags", "maxGpuSpendPerHourUsd")
REQUIRED_KEYS += ("network", "cluster")


class ConfigError(ValueError):
    """An invalid stack setting; the message names the key, the bad value and what is allowed."""


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{PROJECT}:{key} = {value!r} is invalid: {allowed}")


@dataclass(frozen=True)
class NetworkConfig:
    address_space: ipaddress.IPv4Network
    training_subnet: ipaddress.IPv4Network
    endpoint_subnet: ipaddress.IPv4Network
    mode: str  # one of NETWORK_MODES
    public_network_access: bool
    allowed_ip_ranges: tuple[str, ...]

    @property
    def private(self) -> bool:
        return self.mode == "privateEndpoints"


@dataclass(frozen=True)
class StorageConfig:
    data_container: str
    outputs_container: str
    nfs_share_gib: int  # 0: no NFS share (and no NFS account)
    data_protection: str  # one of DATA_PROTECTION


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
    # framework -> prebuilt image ref (azdl:images.prebuilt); those frameworks are not built
    prebuilt_images: Mapping[str, str]


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
            allowed="public IPv4 addresses or ranges of /30 or larger; empty with privateEndpoints",
            example=["203.0.113.0/30"],
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
            "true gives each node a public IP for outbound "
            "traffic; false adds a NAT gateway to the training subnet. Prod requires false.",
            default=False,
            allowed="true or false",
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


def _network(raw: Any, environment: str) -> NetworkConfig:
    s = _Section(
        "network",
        raw,
        (
            "addressSpace",
            "trainingSubnet",
            "privateEndpointSubnet",
            "mode",
            "publicNetworkAccess",
            "allowedIpRanges",
        ),
    )
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
    ranges = s.get("allowedIpRanges", list, [])
    for i, entry in enumerate(ranges):
        key = f"network.allowedIpRanges[{i}]"
        net = _cidr(key, entry)
        if not net.is_global or net.prefixlen > 30:
            raise _fail(
                key,
                entry,
                "a public IPv4 address or a range of /30 or larger "
                "(Azure firewalls take no private ranges, /31 or /32)",
            )
    if ranges and mode == "privateEndpoints":
        raise _fail("network.allowedIpRanges", ranges, "empty with mode privateEndpoints")
    return NetworkConfig(space, training, endpoints, mode, public, tuple(ranges))


def _storage(raw: Any) -> StorageConfig:
    s = _Section(
        "storage", raw, ("dataContainer", "outputsContainer", "nfsShareGiB", "dataProtection")
    )
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
    return StorageConfig(
        containers["dataContainer"], containers["outputsContainer"], nfs, protection
    )


def _cluster(raw: Any, environment: str) -> ClusterConfig:
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
    public_ip = s.get("nodePublicIp", bool, False)
    if environment == "prod" and public_ip:
        raise _fail("cluster.nodePublicIp", public_ip, "a prod stack must set false")
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


def _names(project: str, stack: str, prefix: str, cluster: str) -> Names:
    if not re.fullmatch(r"[a-z][a-z0-9]*", prefix):
        raise _fail(
            "namePrefix",
            prefix,
            "lowercase letters and digits, starting with a letter "
            "(it is part of storage account names)",
        )
    names = derive_names(project, stack, prefix, cluster)
    for field, kind in KINDS.items():
        name = getattr(names, field)
        broken = rule_violation(kind, name)
        if broken:
            raise _fail(
                "namePrefix",
                prefix,
                f"it makes the {kind} name {name!r}, which breaks Azure's rule: {broken}",
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


def load_config(values: Mapping[str, Any], *, stack: str, project: str = PROJECT) -> StackConfig:
    """Validate a stack's settings. Keys may carry the `azdl:` namespace (as in stack files);
    keys of other namespaces (e.g. `azure-native:location`) are ignored."""
    own = {}
    for key, value in values.items():
        namespace, _, bare = key.rpartition(":")
        if namespace in ("", project):
            own[bare] = value
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
    cluster = _cluster(own["cluster"], environment)
    prefix = _typed("namePrefix", own["namePrefix"], str)
    return StackConfig(
        project=project,
        stack=stack,
        environment=environment,
        location=location,
        name_prefix=prefix,
        tags=_tags(own["tags"], environment),
        max_gpu_spend_per_hour_usd=budget,
        network=network,
        storage=_storage(own.get("storage", {})),
        registry_sku=registry_sku,
        cluster=cluster,
        image_build_vm_size=_vm_size(
            "imageBuildVmSize",
            _typed("imageBuildVmSize", own.get("imageBuildVmSize", "Standard_D4s_v3"), str),
        ),
        names=_names(project, stack, prefix, cluster.name),
        prebuilt_images=_prebuilt_images(own.get("images", {})),
    )


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


def load_stack_file(path: Path) -> StackConfig:
    """Validate `stacks/Pulumi.<stack>.yaml` without Pulumi."""
    path = Path(path)
    return load_config(read_stack_file(path), stack=stack_name_of(path))
