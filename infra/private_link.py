"""Private link (private stacks): a private endpoint per service, registered in private DNS zones
the stack creates or a landing zone owns (docs/architecture.md, "Network and private link")."""

import hashlib
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, privatedns

from infra.config import ENDPOINT_DNS_ZONES, StackConfig

# Sub-resource (group id) -> the private DNS zones its endpoint registers in.
ZONES = ENDPOINT_DNS_ZONES


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
        # zone name -> its id (created here, or the landing zone's)
        self.zone_ids: dict[str, pulumi.Input[str]] = {}
        self.zones: dict[str, privatedns.PrivateZone] = {}
        self.links: dict[str, privatedns.VirtualNetworkLink] = {}  # zone -> the own VNet's link
        self.extra_links: list[privatedns.VirtualNetworkLink] = []  # network.dnsZoneVnetLinks
        # Two linked VNets may share a name (in different groups): the id's hash tells them apart.
        extra_vnets = [
            (f"{vnet.rsplit('/', 1)[-1]}-{hashlib.sha256(vnet.lower().encode()).hexdigest()[:6]}",
             vnet)
            for vnet in cfg.network.dns_zone_vnet_links
        ]  # fmt: skip
        existing = cfg.network.existing
        own_vnet = existing.vnet_id.rsplit("/", 1)[-1] if existing else cfg.names.virtual_network
        by_policy = cfg.network.zone_groups_by_policy
        wanted = set() if by_policy else {z for e in args.endpoints for z in ZONES[e.group_id]}
        for zone_name in sorted(wanted):
            if zone_name in cfg.network.private_dns_zone_ids:
                self.zone_ids[zone_name] = cfg.network.private_dns_zone_ids[zone_name]
                continue
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

            def link(logical: str, link_name: str, vnet_id: pulumi.Input[str], zone=zone):
                return privatedns.VirtualNetworkLink(
                    logical,
                    privatedns.VirtualNetworkLinkArgs(
                        resource_group_name=rg,
                        private_zone_name=zone.name,
                        virtual_network_link_name=link_name,
                        location="global",
                        virtual_network=privatedns.SubResourceArgs(id=vnet_id),
                        registration_enabled=False,
                        tags=cfg.tags,
                    ),
                    child,
                )

            self.links[zone_name] = link(f"{zone_name}-link", f"{own_vnet}-link", args.vnet_id)
            for vnet_name, vnet_id in extra_vnets:
                self.extra_links.append(
                    link(f"{zone_name}-link-{vnet_name}", f"{vnet_name}-link", vnet_id)
                )
            self.zones[zone_name] = zone
            self.zone_ids[zone_name] = zone.id

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
            self.endpoints[e.name] = endpoint
            self._zones_of[e.name] = [] if by_policy else ZONES[e.group_id]
            if by_policy:
                continue
            self.zone_groups[e.name] = network.PrivateDnsZoneGroup(
                f"{e.name}-dns",
                network.PrivateDnsZoneGroupArgs(
                    resource_group_name=rg,
                    private_endpoint_name=endpoint.name,
                    private_dns_zone_group_name="default",
                    private_dns_zone_configs=[
                        network.PrivateDnsZoneConfigArgs(
                            name=zone.replace(".", "-"), private_dns_zone_id=self.zone_ids[zone]
                        )
                        for zone in ZONES[e.group_id]
                    ],
                ),
                child,
            )
        self.register_outputs({"privateEndpoints": sorted(self.endpoints)})

    def private_path(self, endpoint: str) -> list[pulumi.Resource]:
        """What must exist before anything in the VNet reaches the endpoint's service by name:
        the endpoint, its DNS zone group and the VNet links of its zones (the deploy-order
        rules in azdl/review/deploy_order.py check that callers depend on all of them)."""
        links = [self.links[z] for z in self._zones_of[endpoint] if z in self.links]
        groups = [self.zone_groups[endpoint]] if endpoint in self.zone_groups else []
        return [self.endpoints[endpoint], *groups, *links]
