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
STRING_KEYS += ("nameSuffix",)  # pins the global names' suffix (infra/naming.py)
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
    outputs_protection: str  # one of DATA_PROTECTION: the outputs account (checkpoints, logs)


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


class _Section:
    """Typed access to one structured key, rejecting unknown sub-keys."""

    def __init__(self, key: str, raw: Any, known: tuple[str, ...]):
        if not isinstance(raw, Mapping):
            raise _fail(key, raw, f"an object with the keys {', '.join(known)}")
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise _fail(
                f"{key}.{unknown[0]}", raw[unknown[0]], f"unknown key; known: {', '.join(known)}"
            )
        self.key, self.raw = key, raw

    def get(self, name: str, kind: type, default: Any = ...) -> Any:
        key = f"{self.key}.{name}"
        if name not in self.raw:
            if default is ...:
                raise ConfigError(f"{PROJECT}:{key} is required but missing")
            return default
        return _typed(key, self.raw[name], kind)


TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
              list: "a list", dict: "an object"}  # fmt: skip


def _typed(key: str, value: Any, kind: type) -> Any:
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise _fail(key, value, f"must be {TYPE_WORDS[kind]}")
    return value


def _one_of(key: str, value: Any, allowed: tuple[str, ...] | Mapping[str, str]) -> Any:
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


def _storage(raw: Any, environment: str) -> StorageConfig:
    s = _Section(
        "storage",
        raw,
        ("dataContainer", "outputsContainer", "nfsShareGiB", "dataProtection",
         "outputsProtection"),
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
    return StorageConfig(
        containers["dataContainer"], containers["outputsContainer"], nfs, protection, outputs
    )


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
    for key in sorted(own):
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
        storage=_storage(own.get("storage", {}), environment),
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
