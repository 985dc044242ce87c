"""Metrics through MLflow: the node throughput helper, a missing or unreachable tracking server.
What a 2-worker run of each built-in flavour leaves in a real local store is checked on the
training tests' synthetic runs (tests/training/mlflow_run.py), which run with one."""

import os

import mlflow
import pytest

from azdl.jobs.safeguards import local_mlflow_uri
from training import epoch_log

# MLflow's import configures its loggers with logging.config.dictConfig, which closes every
# handler already there (logging/config.py, _clearExistingHandlers); absl's handler, which
# TensorFlow's import puts on the root logger, closes its stream unless it is the current
# sys.stderr (absl/logging/__init__.py, PythonHandler.close). Imported first inside a capsys test
# after a test that imported TensorFlow, MLflow closed pytest's own capture of stderr, and the
# training stream's pytest died at its end ("lost sys.stderr", a cold make test at 5b97201).
# Imported while the module is collected, it clears the handlers before any test imports TF.


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
