"""Registry: the Azure Container Registry the training images are built into and pulled from.

The admin user stays off: the cluster pulls with its managed identity (AcrPull). Private
stacks get the Premium tier (the only one that takes private endpoints) with public network
access disabled. Images are built by ACR Tasks (infra/images.py), whose agents run outside the
VNet: since 1 June 2025 a network-restricted registry admits them only with
`networkRuleBypassAllowedForTasks: true` ("Manage network bypass policy for tasks",
https://learn.microsoft.com/azure/container-registry/manage-network-bypass-policy-for-tasks,
ms.date 2025-05-15; MicrosoftDocs/azure-management-docs
articles/container-registry/manage-network-bypass-policy-for-tasks.md).

That property is in the registry API from 2025-05-01-preview on, and in the stable 2025-11-01
(Azure/azure-rest-api-specs, specification/containerregistry/resource-manager/
Microsoft.ContainerRegistry/Registry/Registry.models.tsp: `networkRuleBypassAllowedForTasks`,
default false, not marked preview-only). pulumi-azure-native 3.29's typed `Registry` speaks
2023-01-01-preview, which lacks it, so the registry is declared through the provider's generic
ARM resource (`resources.Resource`) at REGISTRY_API_VERSION; its `properties` are the ARM
body's, as the spec names them.

Zone redundancy is chosen, not left to the API's default ("Disabled"): Enabled for a prod
Premium registry, Disabled otherwise (a Premium option: `zoneRedundancy`). Azure now makes
every registry in a region with availability zones zone-redundant whatever the property says
("The zoneRedundancy property ... might still show as false even though zone redundancy is
active", learn.microsoft.com/azure/container-registry/zone-redundancy), so prod states what it
relies on and scanners that read the property see it.
"""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import resources

from infra.config import StackConfig

REGISTRY_API_VERSION = "2025-11-01"


@dataclass
class RegistryArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]


def zone_redundant(cfg: StackConfig) -> bool:
    return cfg.environment == "prod" and cfg.registry_sku == "Premium"


class Registry(pulumi.ComponentResource):
    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:Registry", name, None, opts)
        cfg = args.config
        private = cfg.network.private
        # Keyword arguments, not ResourceArgs: its `resource_name` field collides with the
        # logical name in the SDK's constructor (the keyword form renames it `resource_name_`).
        self.registry = resources.Resource(
            "registry",
            pulumi.ResourceOptions(parent=self),
            resource_group_name=args.resource_group_name,
            resource_provider_namespace="Microsoft.ContainerRegistry",
            parent_resource_path="",
            resource_type="registries",
            resource_name_=cfg.names.registry,
            api_version=REGISTRY_API_VERSION,
            location=cfg.location,
            sku=resources.SkuArgs(name=cfg.registry_sku),
            properties={
                "adminUserEnabled": False,
                "anonymousPullEnabled": False,
                "publicNetworkAccess": "Disabled" if private else "Enabled",
                "networkRuleBypassOptions": "AzureServices",
                # ACR Tasks builds push here from outside the VNet (see above).
                "networkRuleBypassAllowedForTasks": True,
                "zoneRedundancy": "Enabled" if zone_redundant(cfg) else "Disabled",
            },
            tags=cfg.tags,
        )
        self.name = self.registry.name
        self.login_server = self.registry.properties.apply(lambda p: p["loginServer"])
        self.register_outputs({"loginServer": self.login_server, "registryId": self.registry.id})
