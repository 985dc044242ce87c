"""Stack outputs as `pulumi stack output --json` prints them, for a few cluster sizes, and the
mocked MLClient: fixtures the jobs and Azure tests share (their conftests register them)."""

import json
from types import SimpleNamespace

import pytest

from azdl.jobs.stack_outputs import parse_outputs
from infra.catalogue import VM_SIZES

ENV_PREFIX = (
    "/subscriptions/sub-1/resourceGroups/azdlprod-rg/providers/Microsoft.MachineLearningServices"
    "/workspaces/azdlprod-mlw/environments"
)


def stack_outputs(vm_size="Standard_ND96isr_H100_v5", max_nodes=4, nfs=True, **extra) -> dict:
    values = {
        "resourceGroupName": "azdlprod-rg",
        "location": "westeurope",
        "subscriptionId": "sub-1",
        "workspaceName": "azdlprod-mlw",
        "clusterName": "gpu-cluster",
        "clusterVmSize": vm_size,
        "clusterMaxNodes": float(max_nodes),  # Pulumi hands integers over as floats
        "gpusPerNode": 8,
        "infiniband": True,
        "clusterIdentityClientId": "client-id-1",
        "registryLoginServer": "azdlprodacr.azurecr.io",
        "dataAccountName": "azdlproddata",
        "dataAccountUrl": "https://azdlproddata.blob.core.windows.net/",
        "dataContainerName": "training-data",
        "dataContainerUrl": "https://azdlproddata.blob.core.windows.net/training-data",
        "outputsAccountName": "azdlprodout",
        "outputsAccountUrl": "https://azdlprodout.blob.core.windows.net/",
        "outputsContainerName": "outputs",
        "nfsMountTarget": (
            "azdlprodnfs.file.core.windows.net:/azdlprodnfs/training-data" if nfs else None
        ),
        "dataDatastore": "azdl_training_data",
        "outputsDatastore": "azdl_outputs",
        "images": {
            "tensorflow": "azdlprodacr.azurecr.io/azdl/tensorflow:abc@sha256:" + "1" * 64,
            "pytorch": "azdlprodacr.azurecr.io/azdl/pytorch:def@sha256:" + "2" * 64,
        },
        "environments": {
            "tensorflow": f"{ENV_PREFIX}/azdl-tensorflow/versions/abc",
            "pytorch": f"{ENV_PREFIX}/azdl-pytorch/versions/def",
        },
    }
    return values | extra


@pytest.fixture
def outputs_file(tmp_path):
    """Write stack outputs to a file; returns its path (as --outputs takes it)."""

    def write(**kwargs):
        path = tmp_path / "outputs.json"
        path.write_text(json.dumps(stack_outputs(**kwargs)))
        return path

    return write


@pytest.fixture
def outputs():
    def make(**kwargs):
        return parse_outputs(stack_outputs(**kwargs), "test outputs")

    return make


@pytest.fixture
def ml_client(mocker):
    """MLClient replaced by a mock: no credentials, no network. Returns the mock class."""
    mocker.patch("azure.identity.DefaultAzureCredential")
    client_class = mocker.patch("azure.ai.ml.MLClient")
    client = client_class.return_value
    client.jobs.create_or_update.side_effect = lambda job: SimpleNamespace(
        name=job.name, studio_url=f"https://ml.azure.com/runs/{job.name}", status="Starting"
    )
    # Ample vCPU quota for every catalogue size (tests/azure/test_quota.py tests the check itself).
    client.compute.get.return_value = SimpleNamespace(tier="dedicated")
    client.compute.list_sizes.return_value = [
        SimpleNamespace(name=name, family="standardAnyFamily", v_cp_us=size.vcpus)
        for name, size in VM_SIZES.items()
    ]
    client.compute.list_usage.return_value = [
        SimpleNamespace(
            id="/subscriptions/sub-1/usages", name={"value": name}, limit=10**6, current_value=0
        )
        for name in (
            "Standard Any Family Cluster Dedicated vCPUs",
            "Total Cluster Dedicated Regional vCPUs",
        )
    ]
    return client_class
