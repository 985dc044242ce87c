"""The vCPU quota before submit, read through azure-ai-ml's own conversions of the REST API's
documented responses (tests/azure/data: trimmed copies of azure-rest-api-specs'
machinelearningservices 2024-10-01 examples Usage/list.json and VirtualMachineSize/list.json,
and of stable 2025-12-01's Compute/listNodes.json at 5485d5f, the response's body without its
nextLink)."""

from types import SimpleNamespace

import pytest
from azure.core.exceptions import HttpResponseError

from azdl.cli import main
from azdl.jobs.quota import read_quota
from tests.azure.documented import h100_size, h100_usages, sdk_nodes, sdk_sizes, sdk_usages


def client_with(usages, sizes, tier="dedicated", nodes=()):
    compute = SimpleNamespace(
        list_usage=lambda location=None: usages,
        list_sizes=lambda location=None: sizes,
        list_nodes=lambda name: list(nodes),
        get=lambda name: SimpleNamespace(tier=tier),
    )
    return SimpleNamespace(compute=compute)


def test_the_documented_responses_give_family_and_regional_free_cores():
    quota = read_quota(client_with(sdk_usages(), sdk_sizes()), "eastus", "Standard_DS4_v2")
    # Standard DSv2 Family Cluster Dedicated vCPUs: 2 of 24 used; regional total 14 of 24
    assert quota.family == "Standard DSv2 Family Cluster Dedicated vCPUs"
    assert (quota.vcpus_per_node, quota.family_free, quota.regional_free) == (8, 22, 10)
    assert quota.free == 10 and quota.shortfall(1) == 0 and quota.shortfall(2) == 6


def test_low_priority_nodes_count_against_the_low_priority_totals():
    quota = read_quota(client_with(sdk_usages(), sdk_sizes()), "eastus", "Standard_DS4_v2",
                       "low_priority")  # fmt: skip
    # the family's LowPriority limit is -1 (none); the regional LowPriority total: 18 of 50
    assert (quota.family_free, quota.regional_free, quota.free) == (None, 32, 32)


def h100_cluster(ml_client, used: int, limit: int = 192, nodes=()):
    """The documented shapes for the stack's ND96isr_H100_v5 (tests/azure/documented.py)."""
    client = ml_client.return_value
    client.compute.list_usage.return_value = sdk_usages(h100_usages(used, limit))
    client.compute.list_sizes.return_value = sdk_sizes([h100_size()])
    client.compute.list_nodes.return_value = list(nodes)
    return client


def submit(outputs_file, nodes: int, *extra):
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    return main(["submit", "--outputs", str(path), "--nodes", str(nodes), "--storage",
                 "synthetic", "--name", "q1", *extra])  # fmt: skip


def test_a_job_that_cannot_start_is_stopped_before_submitting(ml_client, outputs_file, capsys):
    client = h100_cluster(ml_client, used=96)
    assert submit(outputs_file, 2) == 2
    err = capsys.readouterr().err
    assert (
        "the job cannot start: 2 x Standard_ND96isr_H100_v5 needs 192 vCPUs of Standard "
        "NDSH100v5 Family Cluster Dedicated vCPUs, and 96 are free" in err
    )
    assert "how-to-manage-quotas" in err
    client.jobs.create_or_update.assert_not_called()


def test_a_job_that_fits_is_submitted_with_the_figures_shown(ml_client, outputs_file, capsys):
    client = h100_cluster(ml_client, used=0)
    assert submit(outputs_file, 2) == 0
    assert "quota: 192 vCPUs needed, 192 free" in capsys.readouterr().err
    client.jobs.create_or_update.assert_called_once()


def test_retries_and_bench_check_the_quota_too(ml_client, outputs_file, capsys):
    client = h100_cluster(ml_client, used=96)
    assert submit(outputs_file, 2, "--max-retries", "1") == 2
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    assert main(["bench", "--outputs", str(path), "--nodes", "1,2"]) == 2
    client.jobs.create_or_update.assert_not_called()


@pytest.mark.parametrize(
    "failure",
    [HttpResponseError(message="(AuthorizationFailed) no read access to usages"), None],
)
def test_an_unreadable_quota_warns_and_goes_on(ml_client, outputs_file, capsys, failure):
    client = ml_client.return_value
    if failure is not None:
        client.compute.list_usage.side_effect = failure
    else:  # a size Azure does not list in the region
        client.compute.list_sizes.return_value = sdk_sizes()
    assert submit(outputs_file, 2) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and ("AuthorizationFailed" in err or "lists no" in err)
    client.jobs.create_or_update.assert_called_once()


def test_azure_ai_ml_keeps_the_wire_names_on_its_entities():
    """Why azdl.jobs.quota reads either spelling: if a later azure-ai-ml fills the documented
    attributes, this fails and the fallback can go."""
    usage, size = sdk_usages()[1], sdk_sizes()[0]
    assert (usage.current_value, getattr(usage, "currentValue", None)) == (None, 2)
    assert (size.v_cp_us, getattr(size, "vCPUs", None)) == (None, 8)


def test_the_clusters_own_nodes_hold_cores_free_for_its_job(ml_client, outputs_file, capsys):
    # The cluster already holds 2 nodes (the documented running and idle ones): the family's
    # 192 cores are all in use, by those two nodes.
    client = h100_cluster(ml_client, used=192, nodes=sdk_nodes())
    assert submit(outputs_file, 2) == 0
    assert (
        "quota: 192 vCPUs needed (192 held by the cluster's own 2 current nodes, 0 more), 0 free"
        in capsys.readouterr().err
    )
    client.jobs.create_or_update.assert_called_once()


def test_a_job_larger_than_the_cluster_needs_the_rest_free(ml_client, outputs_file, capsys):
    client = h100_cluster(ml_client, used=192, nodes=sdk_nodes())
    assert submit(outputs_file, 3) == 2
    assert (
        "3 x Standard_ND96isr_H100_v5 needs 288 vCPUs of Standard NDSH100v5 Family Cluster "
        "Dedicated vCPUs (192 held by the cluster's own 2 current nodes, 96 more), and 0 are free"
        in capsys.readouterr().err
    )
    client.jobs.create_or_update.assert_not_called()


def test_nodes_that_cannot_take_the_job_do_not_count():
    # NodeState (2025-12-01): an unusable, leaving or pre-empted node will not run this job.
    nodes = sdk_nodes(["unusable", "leaving", "preempted", "preparing"])
    quota = read_quota(client_with(sdk_usages(), sdk_sizes(), nodes=nodes), "eastus",
                       "Standard_DS4_v2", cluster="cpu-cluster")  # fmt: skip
    assert quota.cluster_nodes == 1  # the preparing one
    # 10 cores free in the region, 8 per node: 2 nodes need one new node's 8
    assert (quota.new_cores(2), quota.shortfall(2), quota.shortfall(3)) == (8, 0, 6)
