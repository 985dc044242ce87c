"""`azdl:network`: the VNet, its subnets, how services are reached, or a landing zone's subnets."""

import ipaddress
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from infra.config.fields import (
    ARM_ID_PATTERNS,
    ID_EXAMPLE,
    Bool,
    Cidr,
    Invalid,
    Missing,
    Section,
    Str,
    arm_id,
    one_of,
    setting,
)

NETWORK_MODES = ("serviceEndpoints", "privateEndpoints")
# network.outbound: restricted = the complete outbound list Azure ML compute needs, then a
# deny-all (infra/network.py); open = no outbound rules, so Azure's default allows everything.
OUTBOUND_MODES = ("restricted", "open")
# network.dnsZoneGroups: stack = each private endpoint gets a DNS zone group from the stack;
# policy = none: a landing zone's Azure Policy (DeployIfNotExists) registers the endpoints in
# its central zones, as the Azure Verified Modules' private_endpoints_manage_dns_zone_group =
# false leaves it (Azure/terraform-azurerm-avm-res-machinelearningservices-workspace#124).
DNS_ZONE_GROUP_MODES = ("stack", "policy")
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


class ExistingSubnets(Section):
    """`network.existing`: a landing zone's subnets, used instead of a VNet of the stack's own
    (the Azure Verified Module for Azure ML workspaces,
    Azure/terraform-azurerm-avm-res-machinelearningservices-workspace, likewise takes a subnet
    resource id per private endpoint instead of creating a network)."""

    training_subnet_id: arm_id("subnet") = setting(
        "Resource id of the subnet the cluster joins.",
        allowed="a subnet resource id",
        example=ID_EXAMPLE + "virtualNetworks/<vnet>/subnets/<subnet>",
    )
    endpoint_subnet_id: arm_id("subnet") = setting(
        "Resource id of the subnet for the private endpoints, in the same VNet.",
        allowed="a subnet resource id of the training subnet's VNet",
        example=ID_EXAMPLE + "virtualNetworks/<vnet>/subnets/<subnet>",
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


class NetworkSettings(Section):
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
