"""`azdl submit -- --checkpoint-every-steps auto` sets the workers' node MTBF from the stack's own
history (azdl.jobs.node_mtbf), through the command: the workspace's jobs are azure-ai-ml's own
Job objects (tests/azure/rest_jobs.py), its computes azure-ai-ml's AmlCompute from the REST
example (Compute/get/AmlCompute.json), MLClient mocked, each job's events in the outputs
container (Azurite) and its logs as JobOperations.download lays them out."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.core.exceptions import ResourceNotFoundError

from azdl.cli import main
from tests.azure.documented import DATA
from tests.azure.outputs_storage import refuse_unless_ended
from tests.azure.rest_jobs import rest_job
from training.checkpoint_plan import NODE_MTBF_ENV, NODE_MTBF_H

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
H100 = "Standard_ND96isr_H100_v5"
# Azure ML's line for a pre-empted node (azdl.jobs.retry.PREEMPTED's source), and a script's bug.
PREEMPTED = "AzureMLCompute job failed. PreemptionError: the node got pre-empted\n"
BUG = 'Traceback (most recent call last):\n  File "train.py", line 3\nKeyError: "lr"\n'
AUTO = ["--", "--checkpoint-every-steps", "auto"]


def job(name, status, start_s, seconds, nodes=2, compute="gpu-cluster", first_event_s=60):
    """An ended job created at `start_s` after T0 that ran `seconds` after its first event."""
    created = T0 + timedelta(seconds=start_s)
    end = created + timedelta(seconds=(first_event_s or 0) + seconds)
    return rest_job(name, status, created, end, instances=nodes, compute=compute)


# On the stack's cluster (H100, dedicated): 2 node-hours completed, 1 pre-empted (an
# interruption), 1 ended by the script's bug and 1 cancelled (no events: from its creation).
# Not counted: the same size at low priority, another size, a running job, a job not azdl's, a
# job on a deleted compute.
JOBS = [
    job("a1", "Completed", 0, 3600),
    job("a2", "Failed", 4000, 1800),
    job("a3", "Failed", 6000, 900, nodes=4),
    job("a4", "Canceled", 8000, 3600, nodes=1, first_event_s=None),
    job("b1", "Failed", 0, 3600, compute="spot-cluster"),
    job("c1", "Completed", 0, 3600, compute="small-cluster"),
    rest_job("r1", "Running", T0, T0 + timedelta(hours=5)),
    job("x1", "Failed", 0, 3600),
    job("d1", "Failed", 0, 3600, compute="gone-cluster"),
]
del JOBS[7].tags["azdl.framework"]
LOGS = {"a2": PREEMPTED, "a3": BUG, "b1": PREEMPTED, "x1": PREEMPTED, "d1": PREEMPTED}
COMPUTES = {"gpu-cluster": (H100, "Dedicated"), "spot-cluster": (H100, "LowPriority"),
            "small-cluster": ("Standard_NC24ads_A100_v4", "Dedicated")}  # fmt: skip


def aml_compute(name: str):
    """MLClient.compute.get's answer: azure-ai-ml's Compute from the documented REST body."""
    from azure.ai.ml._restclient.arm_ml_service.models import ComputeResource
    from azure.ai.ml.entities import Compute

    if name not in COMPUTES:
        raise ResourceNotFoundError(f"compute {name} not found")
    body = json.loads((DATA / "compute_get_amlcompute.json").read_text())
    body.pop("_source")
    size, priority = COMPUTES[name]
    body["name"] = name
    body["properties"]["properties"] |= {"vmSize": size, "vmPriority": priority}
    return Compute._from_rest_object(ComputeResource(body))


@pytest.fixture
def workspace(ml_client, outputs_storage, tmp_path, monkeypatch):
    """The mocked client serving JOBS, their events in the outputs container, in a project
    folder of its own (its runs/ history)."""
    (tmp_path / "Pulumi.yaml").write_text("name: team\nruntime: python\n")
    monkeypatch.chdir(tmp_path)
    client = ml_client.return_value
    client.jobs.list.side_effect = lambda **kw: iter(JOBS)
    client.compute.get.side_effect = aml_compute
    by_name = {j.name: j for j in JOBS}
    for job in JOBS:
        if job.name != "a4":  # cancelled before its first event
            up = job.creation_context.created_at + timedelta(seconds=60)
            outputs_storage.put_events(job.name, [{
                "attempt": job.name, "round": 0, "process": "node-0-7", "event": "up",
                "t_ms": round(up.timestamp() * 1000)}])  # fmt: skip

    def download(name, download_path, output_name=None, **kwargs):
        assert output_name is None, "the events are read from the outputs container"
        refuse_unless_ended(by_name[name])  # the default artifacts: the job's logs
        (Path(download_path) / "user_logs").mkdir(parents=True)
        (Path(download_path) / "user_logs" / "std_log.txt").write_text(LOGS.get(name, ""))

    client.jobs.download.side_effect = download
    return client


def submitted_environment(client) -> dict:
    return client.jobs.create_or_update.call_args.args[0].environment_variables


def test_the_node_mtbf_comes_from_the_stacks_own_jobs(
    workspace, outputs_storage, outputs_file, capsys
):
    outputs = str(outputs_file())
    assert main(["submit", "--outputs", outputs, "--nodes", "2", *AUTO]) == 0
    # 5 node-hours (2 + 1 + 1 + 1), 1 interruption (a2's pre-emption; a3's bug is not one).
    expected = (NODE_MTBF_H + 5) / (1 + 1)
    assert submitted_environment(workspace)[NODE_MTBF_ENV] == f"{expected:.1f}"
    out = capsys.readouterr().out
    assert (
        f"# node MTBF {expected:,.0f} h for --checkpoint-every-steps auto: this stack's 4 "
        f"ended job(s) on {H100} dedicated nodes, 5.0 node-hours with 1 interruption(s)" in out
    )
    kept = json.loads(Path("runs/history/azdlprod-mlw.json").read_text())
    assert sorted(kept) == ["a1", "a2", "a3", "a4", "b1", "c1"]
    assert (kept["a3"]["interrupted"], kept["a3"]["reason"].split(":")[0]) == (
        False, "the script raised a Python exception")  # fmt: skip
    # An ended job is read once: the next submission reads no events and downloads no logs,
    # and says the same.
    downloads = workspace.jobs.download.call_count
    for blob in outputs_storage.container.list_blobs():
        outputs_storage.container.delete_blob(blob.name)
    assert main(["submit", "--outputs", outputs, "--nodes", "2", *AUTO]) == 0
    assert workspace.jobs.download.call_count == downloads
    assert submitted_environment(workspace)[NODE_MTBF_ENV] == f"{expected:.1f}"


def test_a_new_stack_gets_the_cited_default(workspace, outputs_file, capsys):
    before = list(JOBS)
    JOBS.clear()
    try:
        assert main(["submit", "--outputs", str(outputs_file()), "--nodes", "2", *AUTO]) == 0
    finally:
        JOBS.extend(before)
    assert submitted_environment(workspace)[NODE_MTBF_ENV] == f"{NODE_MTBF_H:.1f}"
    assert "no ended azdl job on" in capsys.readouterr().out


def test_without_auto_or_without_signing_in_no_history_is_read(workspace, outputs_file, capsys):
    outputs = str(outputs_file())
    assert main(["submit", "--outputs", outputs, "--nodes", "2"]) == 0
    assert NODE_MTBF_ENV not in submitted_environment(workspace)
    assert main(["submit", "--outputs", outputs, "--nodes", "2", "--dry-run", *AUTO]) == 0
    out = capsys.readouterr().out
    assert "the stack's own history is read when the job is submitted" in out
    assert NODE_MTBF_ENV not in out
    workspace.jobs.list.assert_not_called()
