"""Diagnostics: one diagnostic setting per service, sending its resource logs to the stack's Log
Analytics workspace (which categories, and why: docs/architecture.md, "Diagnostics")."""

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import monitor

# Log categories as Azure Monitor's "Supported logs" reference names them per resource type
# (MicrosoftDocs/azure-monitor-docs, articles/azure-monitor/reference/supported-logs/).
KEY_VAULT = ("AuditEvent",)  # microsoft-keyvault-vaults-logs, ms.date 2024-11-19
# microsoft-containerregistry-registries-logs, ms.date 2026-07-14
REGISTRY = ("ContainerRegistryLoginEvents", "ContainerRegistryRepositoryEvents")
# microsoft-machinelearningservices-workspaces-logs: those exported at no cost
WORKSPACE = ("AmlComputeClusterEvent", "AmlComputeClusterNodeEvent", "AmlComputeJobEvent",
             "AmlRunStatusChangedEvent", "AmlComputeCpuGpuUtilization")  # fmt: skip
# Storage logs per service, set on `<account>/blobServices/default`
# (microsoft-storage-storageaccounts-blobservices-logs). The training-data account's reads
# (every shard, every epoch, every node) would cost more to ingest than their audit is worth.
BLOB_ALL = ("StorageRead", "StorageWrite", "StorageDelete")
BLOB_CHANGES = ("StorageWrite", "StorageDelete")
SETTING_NAME = "azdl-to-log-analytics"


@dataclass
class Target:
    name: str  # logical suffix, e.g. "key-vault"
    resource: pulumi.Resource  # what the setting depends on (so policies can find it)
    resource_uri: pulumi.Input[str]
    categories: Sequence[str]


def blob_service_uri(account_id: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat(account_id, "/blobServices/default")


@dataclass
class DiagnosticsArgs:
    log_analytics_id: pulumi.Input[str]
    targets: Sequence[Target]


def targets(workspace, registry: pulumi.Resource, store) -> list[Target]:
    """The stack's services (infra.workspace.Workspace, the registry, infra.storage.Storage)."""
    return [
        Target("key-vault", workspace.key_vault, workspace.key_vault.id, KEY_VAULT),
        Target("registry", registry, registry.id, REGISTRY),
        Target("workspace", workspace.workspace, workspace.workspace.id, WORKSPACE),
        Target("outputs-blob", store.outputs_account,
               blob_service_uri(store.outputs_account.id), BLOB_ALL),
        Target("data-blob", store.data_account,
               blob_service_uri(store.data_account.id), BLOB_CHANGES),
    ]  # fmt: skip


class Diagnostics(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: DiagnosticsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:Diagnostics", name, None, opts)
        self.settings: dict[str, monitor.DiagnosticSetting] = {}
        for target in args.targets:
            self.settings[target.name] = monitor.DiagnosticSetting(
                f"{target.name}-diagnostics",
                monitor.DiagnosticSettingArgs(
                    name=SETTING_NAME,
                    resource_uri=target.resource_uri,
                    workspace_id=args.log_analytics_id,
                    logs=[
                        monitor.DiagnosticsLogSettingsArgs(category=c, enabled=True)
                        for c in target.categories
                    ],
                ),
                pulumi.ResourceOptions(parent=self, depends_on=[target.resource]),
            )
        self.register_outputs({"settings": sorted(self.settings)})
