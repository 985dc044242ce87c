"""A job and its retry as `azdl jobs report` and `azdl jobs watch` meet them, for tests: their
Job objects (azure-ai-ml's own, tests/azure/rest_jobs.py) as they stand at a moment, their events
in the outputs container (Azurite, tests/azure/outputs_storage.py) as written by then, and the
logs MLClient.jobs.download lays out for a job that has ended (JobOperations.download,
azure-ai-ml 1.x: the default artifacts' logs under <path>/). r1 fails after step 20 (its
checkpoint: step 10; its log names a pre-emption); r1-retry1 resumes from step 10 and completes
at step 30. Each step batch carries its steps and samples, as training.events writes them (64
samples a step); an epoch ends every 10 steps, the last with a straggler."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.azure.outputs_storage import refuse_unless_ended
from tests.azure.rest_jobs import rest_job

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
RATE = {"azdl.usd_per_hour": "196.64", "azdl.max_cost_usd": "50"}  # 2 nodes of 98.32 USD/h
# The line Azure ML writes for a pre-empted node (azdl.jobs.retry.PREEMPTED's source).
PREEMPTED_LOG = "AzureMLCompute job failed. PreemptionError: the node got pre-empted\n"


def at(seconds: float) -> int:
    return round((T0 + timedelta(seconds=seconds)).timestamp() * 1000)


def lines(job: str, process: str, *events) -> list[dict]:
    return [{"attempt": job, "round": 0, "process": process, "t_ms": at(t), "event": kind, **f}
            for t, kind, f in events]  # fmt: skip


def batch(step: int, steps: int) -> dict:
    return {"step": step, "steps": steps, "samples": 64 * steps}


def epoch(number: int, step: int, loss: float, stragglers=None, **values) -> dict:
    """An epoch's end as training.events.epoch writes it."""
    return {"epoch": number, "step": step, "values": {"loss": loss, **values},
            "stragglers": stragglers}  # fmt: skip


EVENTS = {
    "r1": lines("r1", "node-0-7", (30, "up", {}))
    + lines("r1", "node-0-9", (40, "started", {}), (50, "first_step", {"step": 1, "samples": 64}),
            (60, "steps", batch(10, 9)), (60, "epoch", epoch(1, 10, 2.31, [])),
            (60, "checkpoint_start", {"step": 10}), (62, "checkpoint_end", {"step": 10}),
            (80, "steps", batch(20, 10)), (81, "exit", {"step": 20})),
    "r1-retry1": lines("r1-retry1", "node-1-7", (230, "up", {}))
    + lines("r1-retry1", "node-1-9", (240, "started", {}),
            (245, "restore", {"step": 10, "ms": 5000}),
            (250, "first_step", {"step": 11, "samples": 64}), (280, "steps", batch(20, 9)),
            (280, "epoch", epoch(2, 20, 1.94, [])), (310, "steps", batch(30, 10)),
            (310, "epoch", epoch(3, 30, 1.62, [{"rank": 1, "host": "node-1", "ratio": 1.45}],
                                 val_loss=1.7)),
            (315, "end", {"step": 30})),
}  # fmt: skip


def jobs_at(seconds: float, **tags) -> dict:
    """The Job objects as Azure ML would return them `seconds` after T0 (r1-retry1 exists from
    200 s, runs until 330 s), each with `tags` besides its own."""
    found = {"r1": rest_job("r1", "Failed", T0, T0 + timedelta(seconds=130), **RATE, **tags)}
    if seconds >= 200:
        status, modified = ("Completed", 330) if seconds >= 330 else ("Running", seconds)
        found["r1-retry1"] = rest_job(
            "r1-retry1", status, T0 + timedelta(seconds=200), T0 + timedelta(seconds=modified),
            **RATE, **tags, **{"azdl.attempt": "2", "azdl.retry_of": "r1"})  # fmt: skip
    return found


def serve(client, storage, clock_s, **tags) -> None:
    """Make the mocked `client` and the outputs container `storage` answer as they stand
    `clock_s()` seconds after T0, the jobs carrying `tags` besides their own."""

    def now() -> dict:
        for name in EVENTS:
            storage.put_events(name, [e for e in EVENTS[name] if e["t_ms"] <= at(clock_s())])
        return jobs_at(clock_s(), **tags)

    client.jobs.get.side_effect = lambda name: now()[name]
    client.jobs.list.side_effect = lambda **kw: iter(now().values())

    def download(name, download_path, output_name=None, **kwargs):
        assert output_name is None, "the events are read from the outputs container"
        refuse_unless_ended(now()[name])
        (Path(download_path) / "user_logs").mkdir(parents=True)
        text = PREEMPTED_LOG if name == "r1" else "done\n"
        (Path(download_path) / "user_logs" / "std_log.txt").write_text(text)

    client.jobs.download.side_effect = download
