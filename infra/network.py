"""Network: the VNet, the training subnet (with its NSG) and the private-endpoint subnet.

The NSG admits only what Azure ML compute needs inbound (the Batch node-management and Azure ML
service tags) and states the internet deny explicitly. Where nodes have no public IP, a NAT
gateway gives the subnet its outbound path (Azure ML still needs to reach its service tags).
"""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network

from infra.config import StackConfig


@dataclass
class NetworkArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]


def _rule(
    name: str,
    priority: int,
    direction: str,
    source: str,
    destination: str,
    ports: list[str] | str,
    access: str = "Allow",
    protocol: str = "Tcp",
) -> network.SecurityRuleArgs:
    """`ports` is a list of ports/ranges, or "*" for every port: Azure takes "*" only in the
    singular `destinationPortRange` (in the plural list it answers SecurityRuleInvalidPortRange)."""
    return network.SecurityRuleArgs(
        name=name,
        priority=priority,
        direction=direction,
        access=access,
        protocol=protocol,
        source_address_prefix=source,
        source_port_range="*",
        destination_address_prefix=destination,
        destination_port_range="*" if ports == "*" else None,
        destination_port_ranges=None if ports == "*" else ports,
    )


def security_rules(location: str) -> list[network.SecurityRuleArgs]:
    """Inbound: Azure ML's control plane only. Outbound: the service tags Azure ML compute
    needs (from Azure's secured-workspace guidance)."""
    inbound = [
        _rule(
            "AllowBatchNodeManagement",
            100,
            "Inbound",
            "BatchNodeManagement",
            "VirtualNetwork",
            ["29876-29877"],
        ),
        _rule(
            "AllowAzureMachineLearning",
            110,
            "Inbound",
            "AzureMachineLearning",
            "VirtualNetwork",
            ["44224"],
        ),
        _rule("DenyInternetInbound", 4000, "Inbound", "Internet", "*", "*", "Deny", "*"),
    ]
    outbound_tags = [
        "AzureActiveDirectory",
        "AzureMachineLearning",
        "AzureResourceManager",
        f"Storage.{location}",
        f"AzureContainerRegistry.{location}",
        "MicrosoftContainerRegistry",
        "AzureFrontDoor.FirstParty",
    ]
    outbound = [
        _rule(
            f"AllowOutbound{tag.split('.')[0]}",
            100 + 10 * i,
            "Outbound",
            "VirtualNetwork",
            tag,
            ["443"],
        )
        for i, tag in enumerate(outbound_tags)
    ]
    return inbound + outbound


class Network(pulumi.ComponentResource):
    """VNet with a training subnet (NSG, service endpoints in dev, NAT gateway without node
    public IPs) and a subnet for private endpoints."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:Network", name, None, opts)
        cfg, rg = args.config, args.resource_group_name
        child = pulumi.ResourceOptions(parent=self)
        net = cfg.network

        self.vnet = network.VirtualNetwork(
            "vnet",
            network.VirtualNetworkInitArgs(
                resource_group_name=rg,
                virtual_network_name=cfg.names.virtual_network,
                location=cfg.location,
                address_space=network.AddressSpaceArgs(address_prefixes=[str(net.address_space)]),
                tags=cfg.tags,
            ),
            child,
        )
        self.nsg = network.NetworkSecurityGroup(
            "training-nsg",
            network.NetworkSecurityGroupInitArgs(
                resource_group_name=rg,
                network_security_group_name=f"{cfg.names.virtual_network}-training-nsg",
                location=cfg.location,
                security_rules=security_rules(cfg.location),
                tags=cfg.tags,
            ),
            child,
        )
        self.nat_gateway = nat_gateway = None
        if not cfg.cluster.node_public_ip:
            nat_ip = network.PublicIPAddress(
                "nat-ip",
                network.PublicIPAddressInitArgs(
                    resource_group_name=rg,
                    public_ip_address_name=f"{cfg.names.virtual_network}-nat-ip",
                    location=cfg.location,
                    sku=network.PublicIPAddressSkuArgs(name="Standard"),
                    public_ip_allocation_method="Static",
                    tags=cfg.tags,
                ),
                child,
            )
            self.nat_gateway = network.NatGateway(
                "nat",
                network.NatGatewayInitArgs(
                    resource_group_name=rg,
                    nat_gateway_name=f"{cfg.names.virtual_network}-nat",
                    location=cfg.location,
                    sku=network.NatGatewaySkuArgs(name="Standard"),
                    public_ip_addresses=[network.SubResourceArgs(id=nat_ip.id)],
                    tags=cfg.tags,
                ),
                child,
            )
            nat_gateway = network.SubResourceArgs(id=self.nat_gateway.id)
        service_endpoints = (
            []
            if net.private
            else [
                network.ServiceEndpointPropertiesFormatArgs(service=service)
                for service in ("Microsoft.Storage", "Microsoft.KeyVault")
            ]
        )
        self.training_subnet = network.Subnet(
            "training-subnet",
            network.SubnetInitArgs(
                resource_group_name=rg,
                virtual_network_name=self.vnet.name,
                subnet_name="training",
                address_prefix=str(net.training_subnet),
                network_security_group=network.NetworkSecurityGroupArgs(id=self.nsg.id),
                nat_gateway=nat_gateway,
                service_endpoints=service_endpoints,
                # A private subnet (no default outbound access) needs an explicit outbound
                # method: here the NAT gateway. Nodes with public IPs sit behind the load
                # balancer Azure ML creates for them, and Azure documents no outbound rule
                # on it (how-to-secure-training-vnet; default-outbound-access), so such a
                # subnet keeps default outbound access, set explicitly because newer network
                # API versions default to private subnets (docs/deploy.md).
                default_outbound_access=cfg.cluster.node_public_ip,
            ),
            child,
        )
        self.endpoint_subnet = network.Subnet(
            "endpoint-subnet",
            network.SubnetInitArgs(
                resource_group_name=rg,
                virtual_network_name=self.vnet.name,
                subnet_name="private-endpoints",
                address_prefix=str(net.endpoint_subnet),
                private_endpoint_network_policies="Disabled",
                default_outbound_access=False,
            ),
            # Azure updates one subnet of a VNet at a time.
            pulumi.ResourceOptions(parent=self, depends_on=[self.training_subnet]),
        )
        self.register_outputs(
            {
                "vnetId": self.vnet.id,
                "trainingSubnetId": self.training_subnet.id,
                "endpointSubnetId": self.endpoint_subnet.id,
            }
        )
