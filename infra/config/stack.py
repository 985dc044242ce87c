"""`StackConfig`: every `azdl:` key of a stack, the top-level ones declared here, and the rules
across sections."""

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from infra.azure_facts import REQUIRED_TAGS
from infra.config.access import AccessSettings, Operators
from infra.config.compute import ClusterSettings, ImagesSettings, RegistrySettings
from infra.config.fields import (
    PROJECT,
    Float,
    Invalid,
    Missing,
    Section,
    VmSizeName,
    matching,
    one_of,
    rule,
    setting,
)
from infra.config.network import NetworkSettings
from infra.config.resource_groups import ResourceGroupsSettings
from infra.config.storage import StorageSettings
from infra.naming import KINDS, Names, derive_names, rule_violation

ENVIRONMENTS = ("dev", "test", "staging", "prod")


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


class StackConfig(Section):
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
    operators: Operators = setting(
        "Microsoft Entra users or groups that get the roles the operator commands need "
        "(docs/access.md).",
        [],
    )
    access: AccessSettings = setting(AccessSettings.__doc__, {})
    resource_groups: ResourceGroupsSettings | None = setting(
        ResourceGroupsSettings.__doc__,
        default_words="unset: the stack creates <prefix>-rg and <prefix>-data-rg",
    )

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
        groups = self.resource_groups
        existing = (groups.platform, groups.data) if groups else None
        return derive_names(self._project, self._stack, self.name_prefix, self.cluster.name,
                            self._subscription_id, self.name_suffix,
                            resource_groups=existing)  # fmt: skip

    # -- what the program reads besides the settings --
    project = property(lambda self: self._project)
    stack = property(lambda self: self._stack)
    subscription_id = property(lambda self: self._subscription_id)  # None: not known yet
    names = property(lambda self: self._names)
    registry_sku = property(lambda self: self.registry.sku)
    prebuilt_images = property(lambda self: self.images.prebuilt)  # framework -> image ref
    jump_host = property(lambda self: self.access.jump_host)
