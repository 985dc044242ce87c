"""Storage: premium blob for training data, standard storage for outputs, and an NFS 4.1 share,
all in the data resource group. What `pulumi destroy` keeps, the workspace storage's networking
modes and the outputs' recovery settings: docs/architecture.md, "Storage"."""

from dataclasses import dataclass
from urllib.parse import urlparse

import pulumi
from pulumi_azure_native import storage

from infra.config import StackConfig

# Days a deleted (soft-deleted) blob or container, or a previous blob version, stays recoverable.
OUTPUTS_RETENTION_DAYS = {"prod": 30}
DEFAULT_RETENTION_DAYS = 7


@dataclass
class StorageArgs:
    config: StackConfig
    data_resource_group_name: pulumi.Input[str]
    training_subnet_id: pulumi.Input[str]
    # For the workspace storage's resource-instance rule (networkAcls.resourceAccessRules): a
    # workspace's id, or `.../workspaces/*` for those of a resource group.
    tenant_id: pulumi.Input[str] | None = None
    workspace_id: pulumi.Input[str] | None = None


def data_protection(mode: str) -> pulumi.ResourceOptions:
    """Options that keep data resources through `pulumi destroy` (see README, Deploy)."""
    return {
        "protect": pulumi.ResourceOptions(protect=True),
        "retain": pulumi.ResourceOptions(retain_on_delete=True),
        "none": pulumi.ResourceOptions(),
    }[mode]


def strongest(*modes: str) -> str:
    """The most protective of `modes` (protect > retain > none): what a group holding
    resources of each mode must carry, since deleting it deletes them all."""
    order = ("none", "retain", "protect")
    return max(modes, key=order.index)


def nfs_mount_target(file_endpoint: str, account: str, share: str) -> str:
    """`host:/account/share`, what `mount -t nfs -o vers=4,minorversion=1` takes."""
    return f"{urlparse(file_endpoint).hostname}:/{account}/{share}"


class Storage(pulumi.ComponentResource):
    """The three storage accounts, their container/share, and their network rules."""

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:Storage", name, None, opts)
        cfg = args.config
        names, net = cfg.names, cfg.network
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions.merge(child, data_protection(cfg.storage.data_protection))

        mode = cfg.storage.workspace_storage

        def account(
            logical,
            rg,
            account_name,
            kind,
            sku,
            keep_opts=child,
            https_only=True,
            workspace_storage=False,
        ):
            # Private stacks: no public network access, except the workspace's storage in its
            # GA configuration, whose firewall (default deny) admits only the workspace's
            # resource instance and trusted services besides the private endpoints.
            closed = net.private and not (workspace_storage and mode == "firewall")
            instance_rules = (
                [storage.ResourceAccessRuleArgs(tenant_id=args.tenant_id,
                                                resource_id=args.workspace_id)]
                if workspace_storage and args.workspace_id is not None
                else None
            )  # fmt: skip
            return storage.StorageAccount(
                logical,
                storage.StorageAccountArgs(
                    resource_group_name=rg,
                    account_name=account_name,
                    location=cfg.location,
                    kind=kind,
                    sku=storage.SkuArgs(name=sku),
                    minimum_tls_version="TLS1_2",
                    enable_https_traffic_only=https_only,
                    allow_blob_public_access=False,
                    # Azure ML's workspace storage needs shared keys for GA
                    # (how-to-secure-workspace-vnet); `strict` is the documented preview
                    # without them (how-to-disable-local-auth-storage).
                    allow_shared_key_access=workspace_storage and mode != "strict",
                    allow_cross_tenant_replication=False,
                    public_network_access="Disabled" if closed else "Enabled",
                    network_rule_set=storage.NetworkRuleSetArgs(
                        default_action="Deny",
                        bypass="AzureServices",
                        resource_access_rules=instance_rules,
                        virtual_network_rules=[]
                        if net.private
                        else [
                            storage.VirtualNetworkRuleArgs(
                                virtual_network_resource_id=args.training_subnet_id
                            )
                        ],
                        ip_rules=[
                            storage.IPRuleArgs(i_p_address_or_range=r)
                            for r in net.allowed_ip_ranges
                        ],
                    ),
                    tags=cfg.tags,
                ),
                keep_opts,
            )

        self.data_account = account(
            "data",
            args.data_resource_group_name,
            names.data_account,
            "BlockBlobStorage",
            "Premium_LRS",
            keep,
        )
        self.data_container = storage.BlobContainer(
            "data-container",
            storage.BlobContainerArgs(
                resource_group_name=args.data_resource_group_name,
                account_name=self.data_account.name,
                container_name=cfg.storage.data_container,
                public_access="None",
            ),
            keep,
        )
        # Checkpoints and logs: kept as storage.outputsProtection says (protect in prod).
        keep_outputs = pulumi.ResourceOptions.merge(
            child, data_protection(cfg.storage.outputs_protection)
        )
        # In the data group: deleting the platform group would delete it, retained or not.
        self.outputs_account = account(
            "outputs",
            args.data_resource_group_name,
            names.outputs_account,
            "StorageV2",
            cfg.storage.outputs_sku,
            keep_outputs,
            workspace_storage=True,
        )
        self.outputs_recovery = self._outputs_recovery(
            cfg, args.data_resource_group_name, keep_outputs
        )
        self.outputs_container = storage.BlobContainer(
            "outputs-container",
            storage.BlobContainerArgs(
                resource_group_name=args.data_resource_group_name,
                account_name=self.outputs_account.name,
                container_name=cfg.storage.outputs_container,
                public_access="None",
            ),
            keep_outputs,
        )
        self.data_url = self.data_account.primary_endpoints.blob
        self.data_container_url = pulumi.Output.concat(self.data_url, self.data_container.name)
        self.outputs_url = self.outputs_account.primary_endpoints.blob

        self.nfs_account = None
        self.nfs_mount_target: pulumi.Output[str | None] = pulumi.Output.from_input(None)
        if cfg.storage.nfs_share_gib:
            # NFS has no TLS: Azure requires secure transfer off; the VNet-only firewall is
            # what keeps the share private.
            self.nfs_account = account(
                "nfs",
                args.data_resource_group_name,
                names.nfs_account,
                "FileStorage",
                "Premium_LRS",
                keep,
                https_only=False,
            )
            share = storage.FileShare(
                "nfs-share",
                storage.FileShareArgs(
                    resource_group_name=args.data_resource_group_name,
                    account_name=self.nfs_account.name,
                    share_name=names.nfs_share,
                    enabled_protocols="NFS",
                    root_squash="RootSquash",
                    share_quota=cfg.storage.nfs_share_gib,
                ),
                keep,
            )
            self.nfs_mount_target = pulumi.Output.all(
                self.nfs_account.primary_endpoints.file, self.nfs_account.name, share.name
            ).apply(lambda a: nfs_mount_target(*a))

        self.register_outputs(
            {
                "outputsAccountSku": cfg.storage.outputs_sku,
                "dataAccountUrl": self.data_url,
                "dataContainerUrl": self.data_container_url,
                "outputsAccountUrl": self.outputs_url,
                "nfsMountTarget": self.nfs_mount_target,
            }
        )

    def _outputs_recovery(
        self, cfg: StackConfig, rg: pulumi.Input[str], opts: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """Soft delete for blobs and containers; in prod also versioning, with a lifecycle rule
        deleting previous versions after the retention (docs/architecture.md, "Storage")."""
        prod = cfg.environment == "prod"
        days = OUTPUTS_RETENTION_DAYS.get(cfg.environment, DEFAULT_RETENTION_DAYS)
        retention = storage.DeleteRetentionPolicyArgs(enabled=True, days=days)
        account = pulumi.ResourceOptions(depends_on=[self.outputs_account])
        recovery: list[pulumi.Resource] = [
            storage.BlobServiceProperties(
                "outputs-blob-service",
                storage.BlobServicePropertiesArgs(
                    resource_group_name=rg,
                    account_name=self.outputs_account.name,
                    blob_services_name="default",
                    delete_retention_policy=retention,
                    container_delete_retention_policy=retention,
                    is_versioning_enabled=prod,
                ),
                pulumi.ResourceOptions.merge(opts, account),
            )
        ]
        if prod:
            expire = storage.DateAfterCreationArgs(days_after_creation_greater_than=days)
            recovery.append(
                storage.ManagementPolicy(
                    "outputs-lifecycle",
                    storage.ManagementPolicyArgs(
                        resource_group_name=rg,
                        account_name=self.outputs_account.name,
                        management_policy_name="default",
                        policy=storage.ManagementPolicySchemaArgs(
                            rules=[
                                storage.ManagementPolicyRuleArgs(
                                    name="expire-previous-versions",
                                    type="Lifecycle",
                                    enabled=True,
                                    definition=storage.ManagementPolicyDefinitionArgs(
                                        filters=storage.ManagementPolicyFilterArgs(
                                            blob_types=["blockBlob"]
                                        ),
                                        actions=storage.ManagementPolicyActionArgs(
                                            version=storage.ManagementPolicyVersionArgs(
                                                delete=expire
                                            )
                                        ),
                                    ),
                                )
                            ]
                        ),
                    ),
                    pulumi.ResourceOptions.merge(opts, account),
                )
            )
        return recovery
