"""What a 2-worker run of a built-in flavour leaves in its MLflow store (SQLite, as `azdl train`
sets it): one run, every epoch metric once per epoch, written by rank 0 alone. The training
tests' synthetic fixtures run with a store (tests/training/test_tf_training.py,
test_torch_training.py) and hold their runs to this."""

from worker_runs import BALANCED_FACTOR, Run

from azdl.jobs.safeguards import local_mlflow_uri
from training import events, live

EPOCH_METRICS = {
    "loss", "accuracy", "lr", "val_loss", "val_accuracy", "val_top5", "images_per_sec",
    "epoch_time_s", "step_time_s.rank_0", "step_time_s.rank_1",
}  # fmt: skip
TORCH_EPOCH_METRICS = {
    "compute_time_s.rank_0", "compute_time_s.rank_1", "compute_ratio_max", "stragglers",
}  # fmt: skip
# training.live's figures, with the events kept and a rate set (as `azdl submit` sets it).
LIVE_METRICS = {"live.eta_s", "live.cost_usd", "live.cost_usd_projected", "live.goodput_percent"}
USD_PER_HOUR = 98.32
# The torch flavour's run is a balanced one: it names no straggler (BALANCED_FACTOR's why).
TORCH_ARGS = ["--straggler-factor", BALANCED_FACTOR]


def run_env(root) -> dict[str, str]:
    """The two-worker run's environment: its MLflow store, its events, the nodes' rate."""
    return {
        "MLFLOW_TRACKING_URI": local_mlflow_uri(root),
        events.DIR_ENV: str(root / "events"),
        live.RATE_ENV: str(USD_PER_HOUR),
    }


def check_live(client, run_id: str, epochs: int, run: Run, folder) -> None:
    """training.live's figures at each epoch against rank 0's events (`folder`): the ETA at the
    epoch's wall time; the time stepping (from the first step to the epoch's event, less the
    checkpoints written before it) that the goodput and the cost's time imply, to the ms; the
    process's time so far from its launch at most and from its first event at least (psutil's
    start: to a second)."""

    def history(name):
        return [m.value for m in sorted(client.get_metric_history(run_id, name),
                                        key=lambda m: m.step)]  # fmt: skip

    took, eta = history("epoch_time_s"), history("live.eta_s")
    cost, projected = history("live.cost_usd"), history("live.cost_usd_projected")
    goodput = history("live.goodput_percent")
    assert eta == [(epochs - e) * t for e, t in enumerate(took, start=1)], (eta, took)
    found = events.read(folder)
    (first,) = [e["t_ms"] for e in found if e["event"] == "first_step"]
    began = min(e["t_ms"] for e in found)
    ends = [e["t_ms"] for e in found if e["event"] == "epoch"]
    stalls = [(s["t_ms"], e["t_ms"]) for s, e in zip(
        [e for e in found if e["event"] == "checkpoint_start"],
        [e for e in found if e["event"] == "checkpoint_end"], strict=True)]  # fmt: skip
    assert len(ends) == epochs == len(cost) == len(goodput)
    for e, at in enumerate(ends):
        ran_ms = cost[e] / USD_PER_HOUR * 3_600_000
        stepping = at - first - sum(end - start for start, end in stalls if end <= at)
        assert abs(goodput[e] / 100 * ran_ms - stepping) < 1, (e, goodput, cost, stepping)
        assert at - began - 1000 <= ran_ms <= at - run.started_ms + 1000, (e, ran_ms, at)
        assert abs(projected[e] - cost[e] - USD_PER_HOUR * eta[e] / 3600) < 1e-9


def check_run(root, framework: str, epochs: int, run: Run) -> None:
    """The run's output and its store (run_env's), as rank 0 alone writes them."""
    output, uri = run.output, local_mlflow_uri(root)
    from mlflow.tracking import MlflowClient

    assert output.count("metrics: MLflow run") == 1, output  # rank 0 only
    if framework == "torch":  # the straggler line; a slow rank: tests/training/test_stragglers.py
        assert output.count(f"- no straggler (at {BALANCED_FACTOR}x)") == epochs, output
        assert f"stragglers over the run: none in {epochs} epochs" in output
        assert "straggler: rank" not in output
    else:
        assert output.count(f"stragglers: not timed by the {framework} flavour") == 1

    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "azdl"]
    (mlrun,) = client.search_runs([experiment.experiment_id])
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["framework"] == framework and mlrun.data.params["workers"] == "2"
    logged = set(mlrun.data.metrics)
    expected = EPOCH_METRICS | LIVE_METRICS
    expected |= TORCH_EPOCH_METRICS if framework == "torch" else set()
    assert logged >= expected, expected - logged
    if framework == "torch":
        assert mlrun.data.tags["stragglers"] == "none"
    assert any(name.startswith("images_per_sec.node_") for name in logged)
    for name in expected:
        history = client.get_metric_history(mlrun.info.run_id, name)
        assert sorted(m.step for m in history) == list(range(1, epochs + 1)), (name, history)
    check_live(client, mlrun.info.run_id, epochs, run, root / "events")
    (final,) = client.get_metric_history(mlrun.info.run_id, "run_images_per_sec")
    assert final.value > 0
