"""The whole program under mocks, for every stack file: resources, security settings, outputs."""

from conftest import STACKS_DIR

from infra.config import load_stack_file

OUTPUT_KEYS = {
    "resourceGroupName", "location", "subscriptionId", "workspaceName", "clusterName",
    "clusterVmSize", "clusterMaxNodes", "gpusPerNode", "infiniband", "clusterIdentityClientId",
    "registryLoginServer", "dataAccountName", "dataAccountUrl", "dataContainerName",
    "dataContainerUrl", "outputsAccountName", "outputsAccountUrl", "outputsContainerName",
    "nfsMountTarget",
}  # fmt: skip


def test_every_stack_renders_with_all_outputs(rendering):
    assert set(rendering.outputs) >= OUTPUT_KEYS
    for key in OUTPUT_KEYS - {"nfsMountTarget"}:
        assert rendering.outputs[key] not in (None, ""), key


def test_resource_group_is_in_the_configured_location(rendering):
    cfg = load_stack_file(STACKS_DIR / f"Pulumi.{rendering.stack}.yaml")
    group = rendering.get("azure-native:resources:ResourceGroup", "resource-group")
    assert group.inputs["location"] == cfg.location
    assert group.inputs["resourceGroupName"] == rendering.outputs["resourceGroupName"]
