"""Workspace: the Azure ML workspace with its Key Vault, Application Insights and Log Analytics,
and the identity-based datastores jobs address their data and outputs by
(docs/architecture.md, "Workspace and cluster")."""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import (
    applicationinsights,
    keyvault,
    machinelearningservices,
    operationalinsights,
)

from infra.config import StackConfig

# Azure ML datastore names: lowercase letters, digits and underscores.
DATA_DATASTORE = "azdl_training_data"
OUTPUTS_DATASTORE = "azdl_outputs"


@dataclass
class BlobContainer:
    """A blob container as a datastore sees it."""

    resource_group_name: pulumi.Input[str]
    account_name: pulumi.Input[str]
    container_name: pulumi.Input[str]


@dataclass
class WorkspaceArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    tenant_id: pulumi.Input[str]
    training_subnet_id: pulumi.Input[str]
    storage_account_id: pulumi.Input[str]
    registry_id: pulumi.Input[str]
    data_container: BlobContainer
    outputs_container: BlobContainer
    # Names Azure soft-deletes, new for every deployment (infra/naming.py, with_deployment).
    workspace_name: pulumi.Input[str] = ""
    key_vault_name: pulumi.Input[str] = ""


class Workspace(pulumi.ComponentResource):
    def __init__(self, name: str, args: WorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:Workspace", name, None, opts)
        cfg, rg = args.config, args.resource_group_name
        names, net = cfg.names, cfg.network
        child = pulumi.ResourceOptions(parent=self)
        prod = cfg.environment == "prod"

        self.log_analytics = operationalinsights.Workspace(
            "logs",
            operationalinsights.WorkspaceArgs(
                resource_group_name=rg,
                workspace_name=names.log_analytics,
                location=cfg.location,
                sku=operationalinsights.WorkspaceSkuArgs(name="PerGB2018"),
                retention_in_days=30,
                tags=cfg.tags,
            ),
            child,
        )
        # Keyword arguments, not ComponentArgs: its `resource_name` field collides with the
        # logical name in the SDK's constructor (the keyword form renames it `resource_name_`).
        self.app_insights = applicationinsights.Component(
            "app-insights",
            child,
            resource_group_name=rg,
            resource_name_=names.app_insights,
            location=cfg.location,
            kind="web",
            application_type="web",
            ingestion_mode="LogAnalytics",
            workspace_resource_id=self.log_analytics.id,
            tags=cfg.tags,
        )
        self.key_vault = keyvault.Vault(
            "key-vault",
            keyvault.VaultArgs(
                resource_group_name=rg,
                vault_name=args.key_vault_name,
                location=cfg.location,
                properties=keyvault.VaultPropertiesArgs(
                    tenant_id=args.tenant_id,
                    sku=keyvault.SkuArgs(family="A", name="standard"),
                    enable_rbac_authorization=True,
                    enable_soft_delete=True,
                    # A deleted vault keeps its (deterministic) name this long; prod also
                    # refuses purging. See README, Deploy.
                    soft_delete_retention_in_days=90 if prod else 7,
                    enable_purge_protection=True if prod else None,
                    public_network_access="Disabled" if net.private else "Enabled",
                    network_acls=keyvault.NetworkRuleSetArgs(
                        default_action="Deny",
                        bypass="AzureServices",
                        virtual_network_rules=[]
                        if net.private
                        else [keyvault.VirtualNetworkRuleArgs(id=args.training_subnet_id)],
                        ip_rules=[keyvault.IPRuleArgs(value=r) for r in net.allowed_ip_ranges],
                    ),
                ),
                tags=cfg.tags,
            ),
            child,
        )
        self.workspace = machinelearningservices.Workspace(
            "workspace",
            machinelearningservices.WorkspaceArgs(
                resource_group_name=rg,
                workspace_name=args.workspace_name,
                location=cfg.location,
                friendly_name=f"azdl {cfg.stack}",
                identity=machinelearningservices.ManagedServiceIdentityArgs(type="SystemAssigned"),
                sku=machinelearningservices.SkuArgs(name="Basic", tier="Basic"),
                storage_account=args.storage_account_id,
                key_vault=self.key_vault.id,
                application_insights=self.app_insights.id,
                container_registry=args.registry_id,
                # Documented only on a page marked preview (how-to-disable-local-auth-storage):
                # docs/access.md says so where operators meet it.
                system_datastores_auth_mode="Identity",
                public_network_access="Disabled" if net.private else "Enabled",
                image_build_compute=names.image_build_compute if net.private else None,
                tags=cfg.tags,
            ),
            child,
        )
        self.name = self.workspace.name

        def datastore(logical: str, name: str, container: BlobContainer, holds: str):
            return machinelearningservices.Datastore(
                logical,
                machinelearningservices.DatastoreArgs(
                    name=name,
                    resource_group_name=rg,
                    workspace_name=self.workspace.name,
                    properties=machinelearningservices.AzureBlobDatastoreArgs(
                        datastore_type="AzureBlob",
                        account_name=container.account_name,
                        container_name=container.container_name,
                        resource_group=container.resource_group_name,
                        # No stored credentials: the identity of whoever uses it.
                        credentials=machinelearningservices.NoneDatastoreCredentialsArgs(
                            credentials_type="None"
                        ),
                        service_data_access_auth_identity="None",
                        description=f"azdl {cfg.stack}: {holds}",
                        tags=dict(cfg.tags),
                    ),
                    # Azure ML would otherwise check the container with the deploying
                    # identity's own data-plane access, which deploying does not need (ARM
                    # spec machinelearningservices 2025-12-01, Datastores_CreateOrUpdate:
                    # query parameter `skipValidation`, "Flag to skip validation").
                    skip_validation=True,
                ),
                child,
            )

        self.data_datastore = datastore(
            "data-datastore", DATA_DATASTORE, args.data_container, "training data (read-only)"
        )
        self.outputs_datastore = datastore(
            "outputs-datastore",
            OUTPUTS_DATASTORE,
            args.outputs_container,
            "checkpoints, logs and TensorBoard events",
        )
        self.register_outputs(
            {
                "workspaceName": self.workspace.name,
                "workspaceId": self.workspace.id,
                "keyVaultId": self.key_vault.id,
                "appInsightsId": self.app_insights.id,
                "dataDatastore": self.data_datastore.name,
                "outputsDatastore": self.outputs_datastore.name,
            }
        )
