"""Network: the VNet, the training subnet (with its NSG and, without node public IPs, a NAT
gateway), the private-endpoint subnet and the jump host's subnets; none of them with
`network.existing` (docs/architecture.md, "Network and private link")."""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network

from infra.config import StackConfig


def standard_public_ip(
    logical: str,
    cfg: StackConfig,
    rg: pulumi.Input[str],
    name: str,
    opts: pulumi.ResourceOptions,
) -> network.PublicIPAddress:
    """A static Standard-SKU public IP, the kind both NAT gateways and Azure Bastion require."""
    return network.PublicIPAddress(
        logical,
        network.PublicIPAddressInitArgs(
            resource_group_name=rg,
            public_ip_address_name=name,
            location=cfg.location,
            sku=network.PublicIPAddressSkuArgs(name="Standard"),
            public_ip_allocation_method="Static",
            tags=cfg.tags,
        ),
        opts,
    )


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


# Outbound a compute cluster needs when its subnet denies everything else: (rule name, service
# tag, protocol, ports). Source: the "Required" and "Situational" tables of Azure ML's public
# internet access list (MicrosoftDocs/azure-ai-docs, articles/machine-learning/includes/
# machine-learning-public-internet-access.md, ms.date 2025-02-10), which
# https://learn.microsoft.com/azure/machine-learning/how-to-secure-workspace-vnet and
# how-to-secure-training-vnet include, and the "Basic configuration" outbound table of
# https://learn.microsoft.com/azure/machine-learning/how-to-access-azureml-behind-firewall
# (ms.date 2026-03-19). Required: AzureActiveDirectory TCP 80/443, AzureMachineLearning TCP
# 443/18881 and UDP 5831, BatchNodeManagement.<region> ANY 443, AzureResourceManager,
# Storage.<region>, AzureFrontDoor.FrontEnd (the studio's global entry point) and
# MicrosoftContainerRegistry.<region>, which depends on AzureFrontDoor.FirstParty, all TCP 443.
# Kept from the situational list: AzureMachineLearning 8787 (the firewall page's basic list),
# Storage 445 (a firewall between compute and the storage endpoints), AzureMonitor (no private
# Azure Monitor here). azdl's own: AzureContainerRegistry.<region> and AzureKeyVault.<region>
# (dev reaches its registry and vault by their public endpoints). tests/infra/
# test_outbound_documented.py holds this list against those pages. "{region}" is the stack's
# location. NFS 4.1 shares add TCP 2049 to Storage (Azure Files NFS needs port 2049 open:
# learn.microsoft.com/azure/storage/files/files-nfs-protocol).
OUTBOUND_SERVICE_RULES = (
    ("AllowAzureActiveDirectoryOutbound", "AzureActiveDirectory", "Tcp", ["80", "443"]),
    ("AllowAzureMachineLearningTcpOutbound", "AzureMachineLearning", "Tcp",
     ["443", "8787", "18881"]),
    ("AllowAzureMachineLearningUdpOutbound", "AzureMachineLearning", "Udp", ["5831"]),
    ("AllowBatchNodeManagementOutbound", "BatchNodeManagement.{region}", "*", ["443"]),
    ("AllowAzureResourceManagerOutbound", "AzureResourceManager", "Tcp", ["443"]),
    ("AllowStorageOutbound", "Storage.{region}", "Tcp", ["443", "445"]),
    ("AllowAzureFrontDoorFrontEndOutbound", "AzureFrontDoor.FrontEnd", "Tcp", ["443"]),
    ("AllowAzureFrontDoorFirstPartyOutbound", "AzureFrontDoor.FirstParty", "Tcp", ["443"]),
    ("AllowMicrosoftContainerRegistryOutbound", "MicrosoftContainerRegistry.{region}", "Tcp",
     ["443"]),
    ("AllowAzureContainerRegistryOutbound", "AzureContainerRegistry.{region}", "Tcp", ["443"]),
    ("AllowAzureMonitorOutbound", "AzureMonitor", "Tcp", ["443"]),
    ("AllowAzureKeyVaultOutbound", "AzureKeyVault.{region}", "Tcp", ["443"]),
)  # fmt: skip
DENY_ALL_OUTBOUND_PRIORITY = 4096  # the lowest precedence a user rule can have


def outbound_rules(location: str, nfs: bool) -> list[network.SecurityRuleArgs]:
    """`network.outbound: restricted`: Azure ML's outbound list, traffic inside the VNet (the
    nodes' own Horovod/NCCL traffic and the private endpoints), then deny everything else. The
    platform's DNS, DHCP and IMDS addresses (168.63.129.16, 169.254.169.254) are not subject to
    NSG rules (learn.microsoft.com/azure/virtual-network/network-security-groups-overview)."""
    rules = []
    for i, (name, tag, protocol, ports) in enumerate(OUTBOUND_SERVICE_RULES):
        if tag.startswith("Storage.") and nfs:
            ports = [*ports, "2049"]
        rules.append(
            _rule(name, 100 + 10 * i, "Outbound", "VirtualNetwork", tag.format(region=location),
                  ports, protocol=protocol)
        )  # fmt: skip
    priority = 100 + 10 * len(OUTBOUND_SERVICE_RULES)
    rules.append(
        _rule("AllowVirtualNetworkOutbound", priority, "Outbound", "VirtualNetwork",
              "VirtualNetwork", "*", protocol="*")
    )  # fmt: skip
    rules.append(
        _rule("DenyAllOutbound", DENY_ALL_OUTBOUND_PRIORITY, "Outbound", "*", "*", "*", "Deny", "*")
    )
    return rules


def security_rules(location: str, outbound: str = "restricted", nfs: bool = False):
    """Inbound: Azure ML's control plane only. Outbound: see `outbound_rules` (restricted) or
    none (open: Azure's default rules allow all outbound traffic)."""
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
    return inbound + (outbound_rules(location, nfs) if outbound == "restricted" else [])


def jump_host_rules(bastion_subnet: str) -> list[network.SecurityRuleArgs]:
    """The jump host's subnet: SSH from AzureBastionSubnet only (Bastion reaches VMs over their
    private IPs: learn.microsoft.com/azure/bastion/bastion-nsg)."""
    return [
        _rule("AllowSshFromBastion", 100, "Inbound", bastion_subnet, "VirtualNetwork", ["22"]),
        _rule("DenyInternetInbound", 4000, "Inbound", "Internet", "*", "*", "Deny", "*"),
    ]


class Network(pulumi.ComponentResource):
    """VNet with a training subnet (NSG, service endpoints in dev, NAT gateway without node
    public IPs), a subnet for private endpoints and, with access.jumpHost, AzureBastionSubnet
    and a jump-host subnet. With network.existing: nothing, only the landing zone's ids.

    `vnet_id`, `training_subnet_id`, `endpoint_subnet_id` are what other components use."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:Network", name, None, opts)
        cfg, rg = args.config, args.resource_group_name
        net = cfg.network
        self.bastion_subnet = self.jump_host_subnet = self.nat_gateway = None
        if net.existing is not None:
            self.vnet_id: pulumi.Input[str] = net.existing.vnet_id
            self.training_subnet_id: pulumi.Input[str] = net.existing.training_subnet_id
            self.endpoint_subnet_id: pulumi.Input[str] = net.existing.endpoint_subnet_id
        else:
            self._create(cfg, rg)
        self.register_outputs(
            {
                "vnetId": self.vnet_id,
                "trainingSubnetId": self.training_subnet_id,
                "endpointSubnetId": self.endpoint_subnet_id,
            }
        )

    def _create(self, cfg: StackConfig, rg: pulumi.Input[str]) -> None:
        net = cfg.network
        child = pulumi.ResourceOptions(parent=self)
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
                security_rules=security_rules(
                    cfg.location, net.outbound, nfs=cfg.storage.nfs_share_gib > 0
                ),
                tags=cfg.tags,
            ),
            child,
        )
        nat_gateway = None
        # The NAT gateway is the outbound path of nodes without public IPs and of the jump host.
        if not cfg.cluster.node_public_ip or cfg.jump_host is not None:
            nat_ip = standard_public_ip(
                "nat-ip", cfg, rg, f"{cfg.names.virtual_network}-nat-ip", child
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
                nat_gateway=None if cfg.cluster.node_public_ip else nat_gateway,
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
        self.vnet_id = self.vnet.id
        self.training_subnet_id = self.training_subnet.id
        self.endpoint_subnet_id = self.endpoint_subnet.id
        if cfg.jump_host is not None:
            self._jump_host_subnets(cfg, rg, nat_gateway)

    def _jump_host_subnets(self, cfg: StackConfig, rg, nat_gateway) -> None:
        """AzureBastionSubnet (Azure requires that exact name and at least a /26:
        learn.microsoft.com/azure/bastion/configuration-settings#subnet) and the jump host's
        subnet, which leaves through the NAT gateway to install its tools."""
        jump = cfg.jump_host
        self.bastion_subnet = network.Subnet(
            "bastion-subnet",
            network.SubnetInitArgs(
                resource_group_name=rg,
                virtual_network_name=self.vnet.name,
                subnet_name="AzureBastionSubnet",
                address_prefix=str(jump.bastion_subnet),
            ),
            pulumi.ResourceOptions(parent=self, depends_on=[self.endpoint_subnet]),
        )
        nsg = network.NetworkSecurityGroup(
            "jump-host-nsg",
            network.NetworkSecurityGroupInitArgs(
                resource_group_name=rg,
                network_security_group_name=f"{cfg.names.virtual_network}-jump-host-nsg",
                location=cfg.location,
                security_rules=jump_host_rules(str(jump.bastion_subnet)),
                tags=cfg.tags,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.jump_host_subnet = network.Subnet(
            "jump-host-subnet",
            network.SubnetInitArgs(
                resource_group_name=rg,
                virtual_network_name=self.vnet.name,
                subnet_name="jump-host",
                address_prefix=str(jump.jump_host_subnet),
                network_security_group=network.NetworkSecurityGroupArgs(id=nsg.id),
                nat_gateway=nat_gateway,
                default_outbound_access=False,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=[self.bastion_subnet]),
        )
