"""`azdl:storage`: the data and outputs accounts, the NFS share and how each is kept."""

from typing import Annotated

from pydantic import ValidationInfo, model_validator

from infra.config.fields import Int, Invalid, Section, azure_name, one_of, rule, setting

DATA_PROTECTION = ("protect", "retain", "none")
MIN_NFS_SHARE_GIB = 100  # smallest premium (provisioned) file share Azure accepts
# storage.workspaceStorage, the networking of the workspace's default (outputs) account:
# firewall = Azure ML's documented configuration for a private workspace (private endpoints +
# firewall default deny, a resource-instance rule for the workspace, trusted services,
# shared-key access on); private = public network access disabled, shared keys on (what the
# Azure Verified Module's private BYO-VNet example deploys, for landing zones whose policy
# forbids public endpoints); strict = public access and shared keys off, which Azure ML
# documents as preview and not for production (how-to-disable-local-auth-storage).
WORKSPACE_STORAGE_MODES = ("firewall", "private", "strict")
# storage.outputsRedundancy: the outputs account's replication (sku Standard_<value>). Prod
# takes a zone-redundant one (ZRS, GZRS): checkpoints survive a zone outage
# (learn.microsoft.com/azure/storage/common/storage-redundancy).
OUTPUTS_REDUNDANCY = ("LRS", "ZRS", "GZRS")
ZONE_REDUNDANT = ("ZRS", "GZRS")


class StorageSettings(Section):
    """The storage accounts: premium blob for training data, standard for outputs, optional
    premium NFS share (infra/storage.py)."""

    data_container: azure_name("blob container") = setting(
        "Container in the premium block-blob account that holds the training shards.",
        "training-data",
        allowed="an Azure blob container name",
    )
    outputs_container: azure_name("blob container") = setting(
        "Container in the standard account for checkpoints, logs and TensorBoard events.",
        "outputs",
        allowed="an Azure blob container name",
    )
    nfs_share_gib: Annotated[
        Int,
        rule(
            lambda g: g == 0 or MIN_NFS_SHARE_GIB <= g <= 102400,
            f"0 (no NFS share) or {MIN_NFS_SHARE_GIB}-102400",
        ),
    ] = setting(
        "Size of the premium NFS 4.1 share; 0 means no NFS account or share (jobs then cannot "
        "use the nfs mode).",
        0,
        allowed=f"0 or {MIN_NFS_SHARE_GIB}-102400",
        example=100,
        alias="nfsShareGiB",
    )
    data_protection: one_of(DATA_PROTECTION) = setting(
        "What `pulumi destroy` does to the data accounts: `protect` (destroy refuses them), "
        "`retain` (left in Azure, dropped from the stack) or `none` (deleted with everything "
        "else).",
        "protect",
    )
    # Checkpoints and logs: kept by `pulumi destroy` by default in prod (docs/deploy.md).
    outputs_protection: one_of(DATA_PROTECTION) = setting(
        "What `pulumi destroy` does to the outputs account and container (checkpoints, logs, "
        "TensorBoard events): `protect`, `retain` or `none`, as for dataProtection.",
        by_environment={"prod": "protect", "*": "none"},
    )
    workspace_storage: one_of(WORKSPACE_STORAGE_MODES) = setting(
        "Networking of the workspace's default storage (outputs account): `firewall` is Azure "
        "ML's GA configuration (shared keys on, firewall default deny, a resource-instance "
        "rule for the workspace, trusted services); `private` disables public access "
        "(privateEndpoints only); `strict` also disables public access and shared keys "
        "(documented preview).",
        "firewall",
        source="https://learn.microsoft.com/azure/machine-learning/how-to-disable-local-auth-storage",
    )
    outputs_redundancy: one_of(OUTPUTS_REDUNDANCY) = setting(
        "Replication of the outputs account (checkpoints, logs): `ZRS` and `GZRS` keep copies "
        "in three availability zones (GZRS also in the paired region). Prod requires ZRS or "
        "GZRS; pick GZRS, or a region with zones, where ZRS is not offered.",
        by_environment={"prod": "ZRS", "*": "LRS"},
        source="https://learn.microsoft.com/azure/storage/common/storage-redundancy",
    )

    @property
    def outputs_sku(self) -> str:
        return f"Standard_{self.outputs_redundancy}"

    @model_validator(mode="after")
    def _prod_outputs_zone_redundant(self, info: ValidationInfo) -> "StorageSettings":
        prod = (info.context or {}).get("environment") == "prod"
        if prod and self.outputs_redundancy not in ZONE_REDUNDANT:
            raise Invalid(self.outputs_redundancy, f"{' or '.join(ZONE_REDUNDANT)} in a prod "
                          "stack (checkpoints and logs survive a zone outage)",
                          "outputsRedundancy")  # fmt: skip
        return self
