"""Private link (private stacks): private endpoints with private DNS zones.

Each private endpoint sits in the endpoint subnet and registers its address in the matching
`privatelink.*` zone, which is linked to the VNet so the cluster resolves the services'
public names to private addresses.
"""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, privatedns

from infra.config import StackConfig

# Sub-resource (group id) -> the private DNS zones its endpoint registers in.
ZONES = {
    "amlworkspace": ["privatelink.api.azureml.ms", "privatelink.notebooks.azure.net"],
    "blob": ["privatelink.blob.core.windows.net"],
    "file": ["privatelink.file.core.windows.net"],
    "vault": ["privatelink.vaultcore.azure.net"],
    "registry": ["privatelink.azurecr.io"],
}


@dataclass
class Endpoint:
    name: str  # short purpose, e.g. "data-blob"
    target_id: pulumi.Input[str]
    group_id: str  # a key of ZONES


@dataclass
class PrivateLinkArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    vnet_id: pulumi.Input[str]
    endpoint_subnet_id: pulumi.Input[str]
    endpoints: list[Endpoint]


class PrivateLink(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: PrivateLinkArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:PrivateLink", name, None, opts)
        cfg, rg = args.config, args.resource_group_name
        child = pulumi.ResourceOptions(parent=self)
        self.zones: dict[str, privatedns.PrivateZone] = {}
        self.links: dict[str, privatedns.VirtualNetworkLink] = {}
        for zone_name in sorted({z for e in args.endpoints for z in ZONES[e.group_id]}):
            zone = privatedns.PrivateZone(
                zone_name,
                privatedns.PrivateZoneArgs(
                    resource_group_name=rg,
                    private_zone_name=zone_name,
                    location="global",
                    tags=cfg.tags,
                ),
                child,
            )
            self.links[zone_name] = privatedns.VirtualNetworkLink(
                f"{zone_name}-link",
                privatedns.VirtualNetworkLinkArgs(
                    resource_group_name=rg,
                    private_zone_name=zone.name,
                    virtual_network_link_name=f"{cfg.names.virtual_network}-link",
                    location="global",
                    virtual_network=privatedns.SubResourceArgs(id=args.vnet_id),
                    registration_enabled=False,
                    tags=cfg.tags,
                ),
                child,
            )
            self.zones[zone_name] = zone

        self.endpoints: dict[str, network.PrivateEndpoint] = {}
        self.zone_groups: dict[str, network.PrivateDnsZoneGroup] = {}
        self._zones_of: dict[str, list[str]] = {}
        for e in args.endpoints:
            endpoint = network.PrivateEndpoint(
                f"{e.name}-pe",
                network.PrivateEndpointArgs(
                    resource_group_name=rg,
                    private_endpoint_name=f"{cfg.name_prefix}-{e.name}-pe",
                    location=cfg.location,
                    subnet=network.SubnetArgs(id=args.endpoint_subnet_id),
                    private_link_service_connections=[
                        network.PrivateLinkServiceConnectionArgs(
                            name=e.name, private_link_service_id=e.target_id, group_ids=[e.group_id]
                        )
                    ],
                    tags=cfg.tags,
                ),
                child,
            )
            self.zone_groups[e.name] = network.PrivateDnsZoneGroup(
                f"{e.name}-dns",
                network.PrivateDnsZoneGroupArgs(
                    resource_group_name=rg,
                    private_endpoint_name=endpoint.name,
                    private_dns_zone_group_name="default",
                    private_dns_zone_configs=[
                        network.PrivateDnsZoneConfigArgs(
                            name=zone.replace(".", "-"), private_dns_zone_id=self.zones[zone].id
                        )
                        for zone in ZONES[e.group_id]
                    ],
                ),
                child,
            )
            self.endpoints[e.name] = endpoint
            self._zones_of[e.name] = ZONES[e.group_id]
        self.register_outputs({"privateEndpoints": sorted(self.endpoints)})

    def private_path(self, endpoint: str) -> list[pulumi.Resource]:
        """What must exist before anything in the VNet reaches the endpoint's service by name:
        the endpoint, its DNS zone group and the VNet links of its zones (the deploy-order
        rules in azdl/review/deploy_order.py check that callers depend on all of them)."""
        links = [self.links[z] for z in self._zones_of[endpoint] if z in self.links]
        return [self.endpoints[endpoint], self.zone_groups[endpoint], *links]
