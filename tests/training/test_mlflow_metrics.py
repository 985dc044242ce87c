"""Metrics through MLflow: a 2-worker run of each built-in flavour leaves one MLflow run in a
real local store (SQLite, as `azdl train` sets it) holding every metric once per epoch, written
by rank 0 alone; the straggler line and its helpers."""

import subprocess

import pytest
from conftest import TINY

from azdl.envs import REPO_ROOT, training_env
from azdl.jobs.safeguards import local_mlflow_uri
from azdl.local import launch_command
from training import epoch_log

EPOCHS = 2
EPOCH_METRICS = {
    "loss", "accuracy", "lr", "val_loss", "val_accuracy", "val_top5", "images_per_sec",
    "epoch_time_s", "step_time_s.rank_0", "step_time_s.rank_1",
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.training_env
@pytest.mark.parametrize("framework", ["torch", "keras", "tf"])
def test_a_two_worker_run_logs_each_metric_once_per_epoch_from_rank_0(framework, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = local_mlflow_uri(tmp_path)
    args = [*TINY, "--batch-size", 8, "--epochs", EPOCHS, "--steps-per-epoch", 3,
            "--val-steps", 1, "--timing-warmup-steps", 1]  # fmt: skip
    cmd = launch_command(framework, 2, "gloo", [str(a) for a in args])
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "1", "MLFLOW_TRACKING_URI": uri})
    run = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=400)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert run.stdout.count("metrics: MLflow run") == 1, run.stdout  # rank 0 only
    assert run.stdout.count("step time per rank: ") == EPOCHS, run.stdout
    assert run.stdout.count("slowest rank over the run: rank ") == 1, run.stdout

    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "azdl"]
    (mlrun,) = client.search_runs([experiment.experiment_id])
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["framework"] == framework and mlrun.data.params["workers"] == "2"
    logged = set(mlrun.data.metrics)
    assert logged >= EPOCH_METRICS, EPOCH_METRICS - logged
    assert any(name.startswith("images_per_sec.node_") for name in logged)
    for name in EPOCH_METRICS:
        history = client.get_metric_history(mlrun.info.run_id, name)
        assert sorted(m.step for m in history) == list(range(1, EPOCHS + 1)), (name, history)
    (final,) = client.get_metric_history(mlrun.info.run_id, "run_images_per_sec")
    assert final.value > 0


def test_the_straggler_line_names_the_slowest_rank_and_its_host():
    times = [(0, "node-a", 0.50), (1, "node-a", 0.52), (2, "node-b", 0.51), (3, "node-b", 0.73)]
    line = epoch_log.step_time_line(times)
    assert line == (
        "step time per rank: median 0.515 s; slowest rank 3 on node-b at 0.730 s (1.42x) "
        "- straggler"
    )
    even = [(0, "a", 0.50), (1, "b", 0.55)]
    assert not epoch_log.step_time_line(even).endswith("straggler")
    assert epoch_log.step_time_line([(0, "a", None), (1, "b", None)]) is None


def test_the_run_summary_names_the_rank_slowest_in_most_epochs():
    per_epoch = [(3, "node-b", 1.43), (1, "node-a", 1.05), (3, "node-b", 1.31)]
    assert epoch_log.slowest_over_run(per_epoch) == (
        "slowest rank over the run: rank 3 on node-b in 2 of 3 epochs (up to 1.43x the median rank)"
    )
    assert epoch_log.slowest_over_run([]) is None


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
