"""Metrics through MLflow: a 2-worker run of each built-in flavour leaves one MLflow run in a
real local store (SQLite, as `azdl train` sets it) holding every metric once per epoch, written
by rank 0 alone; the node throughput helper."""

import os
import subprocess

import pytest
from conftest import BALANCED_FACTOR, TINY

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.jobs.safeguards import local_mlflow_uri
from azdl.local import launch_command
from training import epoch_log

EPOCHS = 2
EPOCH_METRICS = {
    "loss", "accuracy", "lr", "val_loss", "val_accuracy", "val_top5", "images_per_sec",
    "epoch_time_s", "step_time_s.rank_0", "step_time_s.rank_1",
}  # fmt: skip
TORCH_EPOCH_METRICS = {
    "compute_time_s.rank_0", "compute_time_s.rank_1", "compute_ratio_max", "stragglers",
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.training_env
@pytest.mark.parametrize("framework", ["torch", "keras", "tf"])
def test_a_two_worker_run_logs_each_metric_once_per_epoch_from_rank_0(framework, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = local_mlflow_uri(tmp_path)
    args = [*TINY, "--batch-size", 8, "--epochs", EPOCHS, "--steps-per-epoch", 3,
            "--val-steps", 1, "--timing-warmup-steps", 1]  # fmt: skip
    if framework == "torch":  # a balanced run: it names no straggler (BALANCED_FACTOR's why)
        args += ["--straggler-factor", BALANCED_FACTOR]
    cmd = launch_command(framework, 2, "horovod", [str(a) for a in args])
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "1", "MLFLOW_TRACKING_URI": uri})
    run = subprocess.run(cmd, cwd=PACKAGES_ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=400)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert run.stdout.count("metrics: MLflow run") == 1, run.stdout  # rank 0 only
    if framework == "torch":  # the straggler line; a slow rank: tests/training/test_stragglers.py
        assert run.stdout.count(f"- no straggler (at {BALANCED_FACTOR}x)") == EPOCHS, run.stdout
        assert f"stragglers over the run: none in {EPOCHS} epochs" in run.stdout
        assert "straggler: rank" not in run.stdout
    else:
        assert run.stdout.count(f"stragglers: not timed by the {framework} flavour") == 1

    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "azdl"]
    (mlrun,) = client.search_runs([experiment.experiment_id])
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["framework"] == framework and mlrun.data.params["workers"] == "2"
    logged = set(mlrun.data.metrics)
    expected = EPOCH_METRICS | (TORCH_EPOCH_METRICS if framework == "torch" else set())
    assert logged >= expected, expected - logged
    if framework == "torch":
        assert mlrun.data.tags["stragglers"] == "none"
    assert any(name.startswith("images_per_sec.node_") for name in logged)
    for name in expected:
        history = client.get_metric_history(mlrun.info.run_id, name)
        assert sorted(m.step for m in history) == list(range(1, EPOCHS + 1)), (name, history)
    (final,) = client.get_metric_history(mlrun.info.run_id, "run_images_per_sec")
    assert final.value > 0


def test_node_throughput_adds_up_the_ranks_of_each_node():
    times = [(0, "a", 0.5), (1, "a", 0.25), (2, "b", 1.0), (3, "b", None)]
    assert epoch_log.node_throughput(times, 8) == {"a": 16.0 + 32.0, "b": 8.0}


def test_without_a_tracking_uri_rank_0_says_so_once_and_other_ranks_stay_silent(
    monkeypatch, capsys
):
    from training import metrics

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for rank in (0, 1):
        run = metrics.start(rank)
        run.log({"loss": 1.0}, step=1)
        run.log({"loss": 0.5}, step=2)
        assert not run.active
        run.close()
    err = capsys.readouterr().err
    assert err == "metrics: MLFLOW_TRACKING_URI is not set; nothing goes to MLflow\n"


def closed_port_uri() -> str:
    """An http:// tracking URI on a local port that nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def warnings_in(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: metrics: MLflow")]


@pytest.mark.slow
@pytest.mark.training_env
def test_an_unreachable_tracking_server_warns_once_and_the_run_goes_on(monkeypatch, capsys):
    import time

    from training import metrics

    uri = closed_port_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for name in metrics.SHORT_RETRIES:  # the shipped bounds, not a value from the environment
        monkeypatch.delenv(name, raising=False)
    started = time.monotonic()
    run = metrics.start(0, params={"lr": 0.1})
    run.log({"loss": 1.0}, step=1)  # starting the run fails: a warning, and back to training
    run.close()
    took = time.monotonic() - started
    assert not run.active
    (warning,) = warnings_in(capsys.readouterr().err)
    assert warning.startswith(f"warning: metrics: MLflow at {uri} did not take the metrics (")
    assert "training goes on" in warning
    assert took < 20, took  # MLflow's own defaults: minutes per call (training/metrics.py)


@pytest.mark.slow
@pytest.mark.training_env
def test_a_server_lost_mid_run_costs_one_warning(monkeypatch, tmp_path, capsys):
    import mlflow

    from azdl.jobs.safeguards import local_mlflow_uri
    from training import metrics

    monkeypatch.setenv("MLFLOW_TRACKING_URI", local_mlflow_uri(tmp_path))
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the job's own setting wins
    run = metrics.start(0)
    run.log({"loss": 1.0}, step=1)
    assert run.active
    mlflow.set_tracking_uri(closed_port_uri())  # the store goes away under the running job
    run.log({"loss": 0.5}, step=2)  # fails: the warning
    run.close()  # fails again: no second warning
    assert len(warnings_in(capsys.readouterr().err)) == 1
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "0"
    mlflow.set_tracking_uri(None)
