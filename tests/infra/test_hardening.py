"""Day-2 hardening in the rendered plans: zone-redundant, recoverable outputs in prod; the
registry's zone redundancy chosen; resource logs of every service sent to the stack's Log
Analytics workspace with categories Azure documents; the jump host encrypting at host."""

import pytest

from infra.config import ConfigError, load_config
from tests.support.renderings import prod_with_jump_host, stack

AZ = "azure-native:"

# Log categories per resource type, from Azure Monitor's "Supported logs" reference
# (MicrosoftDocs/azure-monitor-docs, articles/azure-monitor/reference/supported-logs/):
# microsoft-keyvault-vaults-logs (ms.date 2024-11-19), microsoft-containerregistry-registries-
# logs (ms.date 2026-07-14), microsoft-machinelearningservices-workspaces-logs (2024-11-19; the
# categories as listed in the resource-logs-categories table), microsoft-storage-
# storageaccounts-blobservices-logs (2024-11-19).
DOCUMENTED_CATEGORIES = {
    "Microsoft.KeyVault/vaults": {"AuditEvent", "AzurePolicyEvaluationDetails"},
    "Microsoft.ContainerRegistry/registries": {
        "ContainerRegistryLoginEvents", "ContainerRegistryRepositoryEvents"},
    "Microsoft.MachineLearningServices/workspaces": {
        "AmlComputeClusterEvent", "AmlComputeClusterNodeEvent", "AmlComputeCpuGpuUtilization",
        "AmlComputeJobEvent", "AmlRunStatusChangedEvent", "ComputeInstanceEvent",
        "DataLabelChangeEvent", "DataLabelReadEvent", "DataSetChangeEvent", "DataSetReadEvent",
        "DataStoreChangeEvent", "DataStoreReadEvent", "DeploymentEventACI",
        "DeploymentEventAKS", "DeploymentReadEvent", "EnvironmentChangeEvent",
        "EnvironmentReadEvent", "InferencingOperationACI", "InferencingOperationAKS",
        "ModelsActionEvent", "ModelsChangeEvent", "ModelsReadEvent", "PipelineChangeEvent",
        "PipelineReadEvent", "RunEvent", "RunReadEvent"},
    "Microsoft.Storage/storageAccounts/blobServices": {
        "StorageRead", "StorageWrite", "StorageDelete"},
}  # fmt: skip


def resource_type_of(uri: str) -> str:
    """`/subscriptions/…/providers/Microsoft.Storage/storageAccounts/x/blobServices/default` ->
    `Microsoft.Storage/storageAccounts/blobServices`."""
    provider_path = uri.split("/providers/", 1)[1].split("/")
    namespace, rest = provider_path[0], provider_path[1:]
    return "/".join([namespace, *rest[0::2]])


def one(r, short_type, name):
    return r.get(AZ + short_type, name)


def test_outputs_redundancy_and_recovery(rendering, cfg):
    outputs = one(rendering, "storage:StorageAccount", "outputs").inputs
    service = one(rendering, "storage:BlobServiceProperties", "outputs-blob-service").inputs
    assert service["accountName"] == outputs["accountName"]
    assert service["resourceGroupName"] == outputs["resourceGroupName"]
    assert service["deleteRetentionPolicy"]["enabled"] is True
    assert service["containerDeleteRetentionPolicy"]["enabled"] is True
    lifecycle = rendering.of_type(AZ + "storage:ManagementPolicy")
    if cfg.environment == "prod":
        assert outputs["sku"]["name"] == "Standard_ZRS"
        assert service["isVersioningEnabled"] is True
        assert service["deleteRetentionPolicy"]["days"] == 30
        (policy,) = lifecycle
        (rule,) = policy.inputs["policy"]["rules"]
        assert rule["definition"]["actions"]["version"]["delete"] == {
            "daysAfterCreationGreaterThan": 30}  # fmt: skip
        assert policy.inputs["accountName"] == outputs["accountName"]
    else:
        assert outputs["sku"]["name"] == "Standard_LRS"
        assert service["isVersioningEnabled"] is False and lifecycle == []


def test_prod_refuses_outputs_in_one_zone_and_takes_gzrs():
    with pytest.raises(ConfigError, match=r"azdl:storage.outputsRedundancy = 'LRS' is invalid: "
                                          r"ZRS or GZRS in a prod stack"):  # fmt: skip
        load_config(stack("prod", storage={"outputsRedundancy": "LRS"}), stack="prod")
    with pytest.raises(ConfigError, match=r"'RAGRS' is invalid: allowed: LRS, ZRS, GZRS"):
        load_config(stack("dev", storage={"outputsRedundancy": "RAGRS"}), stack="dev")
    cfg = load_config(stack("prod", storage={"outputsRedundancy": "GZRS"}), stack="prod")
    assert cfg.storage.outputs_sku == "Standard_GZRS"


def test_registry_zone_redundancy_is_chosen(rendering, cfg):
    registry = one(rendering, "resources:Resource", "registry").inputs  # the generic form
    expected = "Enabled" if cfg.environment == "prod" else "Disabled"
    assert registry["properties"]["zoneRedundancy"] == expected


def test_every_service_logs_documented_categories_to_the_stacks_workspace(rendering):
    logs = one(rendering, "operationalinsights:Workspace", "logs").id
    settings = {s.inputs["resourceUri"]: s.inputs
                for s in rendering.of_type(AZ + "monitor:DiagnosticSetting")}  # fmt: skip
    targets = {
        one(rendering, "keyvault:Vault", "key-vault").id: {"AuditEvent"},
        one(rendering, "resources:Resource", "registry").id: DOCUMENTED_CATEGORIES[
            "Microsoft.ContainerRegistry/registries"],
        one(rendering, "machinelearningservices:Workspace", "workspace").id: {
            "AmlComputeClusterEvent", "AmlComputeJobEvent", "AmlRunStatusChangedEvent"},
        one(rendering, "storage:StorageAccount", "outputs").id + "/blobServices/default": {
            "StorageRead", "StorageWrite", "StorageDelete"},
        one(rendering, "storage:StorageAccount", "data").id + "/blobServices/default": {
            "StorageWrite", "StorageDelete"},
    }  # fmt: skip
    assert set(settings) == set(targets)
    for uri, at_least in targets.items():
        setting = settings[uri]
        assert setting["workspaceId"] == logs
        categories = {log["category"] for log in setting["logs"] if log["enabled"]}
        assert at_least <= categories, uri
        assert categories <= DOCUMENTED_CATEGORIES[resource_type_of(uri)], uri


@pytest.mark.slow  # renders a variant of the program (seconds)
def test_jump_host_encrypts_at_host():
    vm = one(prod_with_jump_host(), "compute:VirtualMachine", "jump-host").inputs
    assert vm["securityProfile"]["encryptionAtHost"] is True
