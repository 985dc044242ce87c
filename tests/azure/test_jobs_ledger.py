"""`azdl jobs ledger` on a job and its retry: azure-ai-ml's own Job objects (from the REST
example, tests/azure/rest_jobs.py) for the timeline, MLClient mocked, and the events as
training.events writes them into each job's `logs` output, in the outputs container (Azurite,
tests/azure/outputs_storage.py)."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from azdl.cli import main
from tests.azure.rest_jobs import rest_job

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
RATE = {"azdl.usd_per_hour": "196.64"}  # 2 nodes of 98.32 USD/h, as azdl submit tags it


def at(seconds: float) -> int:
    return round((T0 + timedelta(seconds=seconds)).timestamp() * 1000)


def lines(job: str, process: str, *events) -> list[dict]:
    return [{"attempt": job, "round": 0, "process": process, "t_ms": at(t), "event": kind, **f}
            for t, kind, f in events]  # fmt: skip


# r1 fails after step 20 (its checkpoint: step 10); r1-retry1 resumes from step 10 and completes.
EVENTS = {
    "r1": lines("r1", "node-0-7", (30, "up", {}))
    + lines("r1", "node-0-9", (40, "started", {}), (50, "first_step", {"step": 1}),
            (60, "steps", {"step": 10}), (60, "checkpoint_start", {"step": 10}),
            (62, "checkpoint_end", {"step": 10}), (80, "steps", {"step": 20}),
            (81, "exit", {"step": 20})),
    "r1-retry1": lines("r1-retry1", "node-1-7", (230, "up", {}))
    + lines("r1-retry1", "node-1-9", (240, "started", {}),
            (245, "restore", {"step": 10, "ms": 5000}), (250, "first_step", {"step": 11}),
            (310, "steps", {"step": 30}), (315, "end", {"step": 30})),
}  # fmt: skip


@pytest.fixture
def workspace(ml_client, outputs_storage):
    jobs = {
        "r1": rest_job("r1", "Failed", T0, T0 + timedelta(seconds=130), **RATE),
        "r1-retry1": rest_job("r1-retry1", "Completed", T0 + timedelta(seconds=200),
                              T0 + timedelta(seconds=330), **RATE,
                              **{"azdl.attempt": "2", "azdl.retry_of": "r1"}),
    }  # fmt: skip
    client = ml_client.return_value
    client.jobs.get.side_effect = jobs.__getitem__
    client.jobs.list.side_effect = lambda **kw: iter(jobs.values())
    for name, found in EVENTS.items():
        outputs_storage.put_events(name, found)
    return client


def test_the_ledger_of_a_job_and_its_retry(workspace, outputs_file, capsys):
    assert main(["jobs", "ledger", "r1-retry1", "--json", "--outputs", str(outputs_file())]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "azdl.job-ledger/v1"
    assert [(a["name"], a["failed"], a["nodes"]) for a in doc["attempts"]] == [
        ("r1", True, 2), ("r1-retry1", False, 2)]  # fmt: skip
    # Worked out by hand (seconds, times 2 nodes): r1 from its `up` (30) to its last change
    # (130): startup 20, productive 10, checkpoint 2, recomputed 18 (steps 11-20), idle 50;
    # r1-retry1 (230-330): startup 10 + 5, restore 5, productive 60, idle 20.
    node_s = {name: b["node_ms"] / 1000 for name, b in doc["buckets"].items()}
    assert node_s == {"productive": 140, "recomputed": 36, "restore": 10, "checkpoint": 4,
                      "startup": 70, "idle": 140}  # fmt: skip
    assert doc["billed"]["node_ms"] == 400_000 and doc["queue_ms"] == 60_000
    assert doc["goodput_percent"] == 35.0 and doc["recomputed_steps"] == 10
    assert doc["restores"] == [{"attempt": "r1-retry1", "round": 0, "step": 10}]
    assert doc["gpus_per_node"] == 8 and doc["usd_per_node_hour"] == 98.32
    assert doc["buckets"]["productive"]["usd"] == round(140 / 3600 * 98.32, 2)
    assert doc["buckets"]["productive"]["gpu_hours"] == round(140 * 8 / 3600, 4)
    assert main(["jobs", "ledger", "r1", "--outputs", str(outputs_file())]) == 0
    table = capsys.readouterr().out
    assert "ledger of r1 (2 nodes, failed), r1-retry1 (2 nodes)" in table
    assert "goodput: 35.0%; queued 60 s (not billed)" in table


def test_a_running_attempt_has_lost_nothing_yet():
    """Its steps after its last checkpoint are not recomputed (yet): only an attempt that ended
    other than Completed is failed; its end is now."""
    from azdl.jobs.ledger_job import attempt_of

    now = T0 + timedelta(seconds=100)
    running = rest_job("r1", "Running", T0, T0 + timedelta(seconds=10))
    attempt = attempt_of(running, EVENTS["r1"], now)
    assert (attempt.failed, attempt.start_ms, attempt.end_ms) == (False, at(30), at(100))
    failed = rest_job("r1", "Failed", T0, T0 + timedelta(seconds=130))
    assert attempt_of(failed, EVENTS["r1"], now).failed
