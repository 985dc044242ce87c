"""Registry: the Azure Container Registry the training images are pushed to and pulled from.

The admin user stays off: the cluster pulls with its managed identity (AcrPull) and image
builds authenticate with Azure AD tokens. Private stacks get the Premium tier (the only one
that takes private endpoints) with public access disabled.

Zone redundancy is chosen, not left to the SDK's default ("Disabled"): Enabled for a prod
Premium registry, Disabled otherwise (it is a Premium option in the registry API,
containerregistry 2023-01-01-preview `zoneRedundancy`). Azure now makes every registry in a
region with availability zones zone-redundant whatever the property says ("The zoneRedundancy
property ... might still show as false even though zone redundancy is active",
learn.microsoft.com/azure/container-registry/zone-redundancy), so prod states what it relies
on and scanners that read the property see it.
"""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import containerregistry

from infra.config import StackConfig


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
        self.registry = containerregistry.Registry(
            "registry",
            containerregistry.RegistryArgs(
                resource_group_name=args.resource_group_name,
                registry_name=cfg.names.registry,
                location=cfg.location,
                sku=containerregistry.SkuArgs(name=cfg.registry_sku),
                admin_user_enabled=False,
                anonymous_pull_enabled=False,
                public_network_access="Disabled" if private else "Enabled",
                network_rule_bypass_options="AzureServices",
                zone_redundancy="Enabled" if zone_redundant(cfg) else "Disabled",
                tags=cfg.tags,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.login_server = self.registry.login_server
        self.register_outputs({"loginServer": self.login_server, "registryId": self.registry.id})
