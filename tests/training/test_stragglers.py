"""Stragglers: each rank's own compute per step (training.torch.compute_clock), gathered once per
epoch, names the slow rank and its host (training.epoch_log). Real workers under Horovod
(horovodrun --gloo) and torchrun, one of them made slow on purpose by
tests/training/slow_rank.py; a balanced run names none (tests/training/mlflow_run.py, on the
2-worker synthetic run of test_torch_training.py)."""

import re
import subprocess
import threading
import time

import pytest
import torch
from worker_runs import TINY

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.jobs.safeguards import local_mlflow_uri
from azdl.local import launch_command
from training import epoch_log, events
from training.torch.compute_clock import ComputeClock

SLOW_RANK_SCRIPT = PACKAGES_ROOT / "tests" / "training" / "slow_rank.py"
EPOCHS = 2
ARGS = [*TINY, "--image-size", "64", "--batch-size", "16", "--epochs", EPOCHS,
        "--steps-per-epoch", 6, "--timing-warmup-steps", 1, "--threads", 1]  # fmt: skip
# Rank 1 of the slow runs burns this much CPU before each forward: about 10x a step's compute
# here (the tiny model at 64 px, batch 16: about 0.01 s).
BURN_S = 0.1


def run_workers(launcher: str, slow_rank: int, mlflow_uri: str | None, extra=None) -> str:
    args = [str(slow_rank), str(BURN_S), *(str(a) for a in ARGS)]
    cmd = launch_command("torch", 2, launcher, args, script=SLOW_RANK_SCRIPT)
    env = training_env(({"MLFLOW_TRACKING_URI": mlflow_uri} if mlflow_uri else {}) | (extra or {}))
    run = subprocess.run(cmd, cwd=PACKAGES_ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=240)  # fmt: skip
    assert run.returncode == 0, run.stdout
    return run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["horovod", "torchrun"])
def test_a_slow_rank_is_named_with_its_host(launcher, tmp_path):
    import socket

    from mlflow.tracking import MlflowClient

    # MLflow's record is the epoch log's, the same under both launchers: checked once (CI time).
    # So are the run's events (training.events.epoch): read under torchrun.
    uri = local_mlflow_uri(tmp_path) if launcher == "horovod" else None
    folder = tmp_path / "events"
    extra = {events.DIR_ENV: str(folder)} if uri is None else {}
    output = run_workers(launcher, slow_rank=1, mlflow_uri=uri, extra=extra)
    host = socket.gethostname()
    named = re.findall(r"compute per step per rank .* - straggler: rank (\d+) on (\S+) at", output)
    assert named == [("1", host)] * EPOCHS, output
    assert f"stragglers over the run: rank 1 on {host} in {EPOCHS} of {EPOCHS} epochs" in output
    if uri is None:
        ended = [e for e in events.read(folder) if e["event"] == "epoch"]
        assert [e["epoch"] for e in ended] == list(range(1, EPOCHS + 1))
        assert all(e["values"]["loss"] > 0 and e["values"]["images_per_sec"] > 0 for e in ended)
        assert [[(s["rank"], s["host"]) for s in e["stragglers"]] for e in ended] == [
            [(1, host)]] * EPOCHS  # fmt: skip
        return
    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "azdl"]
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.tags["stragglers"] == f"rank 1 on {host}"
    assert run.data.metrics["stragglers"] == 1  # the last epoch's
    assert run.data.metrics["compute_time_s.rank_1"] > BURN_S


def _burn(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_the_cpu_clock_counts_this_threads_compute_not_waiting_or_other_threads():
    """Waiting (another rank's collective) and another thread's work (Horovod's background
    thread) leave a step's compute as it is; the warm-up step is left out; the median step."""
    clock = ComputeClock(torch.device("cpu"), warmup_steps=1)
    for compute in (0.2, 0.02, 0.06, 0.02):  # the first: warm-up; the median, not the mean
        clock.start()
        _burn(compute)
        worker = threading.Thread(target=_burn, args=(0.05,))
        worker.start()
        worker.join()
        time.sleep(0.05)
        clock.stop()
        clock.end_step()
    assert clock.take_epoch() == pytest.approx(0.02, abs=0.005)
    assert clock.take_epoch() is None  # taken


def test_a_cut_ends_the_compute_where_the_collective_begins():
    """DDP's hook cuts as each bucket goes out; backward then waits for the allreduce."""
    clock = ComputeClock(torch.device("cpu"), warmup_steps=0)
    for _micro_batch in range(2):  # one step of 2 micro-batches: their compute adds up
        clock.start()
        _burn(0.01)
        clock.cut()
        _burn(0.01)
        clock.cut()  # the last bucket
        _burn(0.05)  # after the last cut: not this rank's compute
        clock.stop()
    clock.end_step()
    assert clock.take_epoch() == pytest.approx(0.04, abs=0.005)


def test_the_straggler_line_names_each_slow_rank_and_its_host():
    computes = [(0, "node-a", 0.50), (1, "node-a", 0.52), (2, "node-b", 0.51), (3, "node-b", 0.73)]
    assert epoch_log.compute_line(computes, 1.2) == (
        "compute per step per rank (forward + backward): median 0.5100 s - straggler: rank 3 "
        "on node-b at 0.7300 s (1.43x)"
    )
    # Of 2 ranks the slow one is held to the fast one (the lower median), not to their mean.
    assert "straggler: rank 1 on b" in epoch_log.compute_line([(0, "a", 1.0), (1, "b", 1.3)], 1.2)
    even = [(0, "a", 0.50), (1, "b", 0.55)]
    assert epoch_log.compute_line(even, 1.2) == (
        "compute per step per rank (forward + backward): median 0.5000 s, slowest 1.10x "
        "- no straggler (at 1.2x)"
    )
    assert epoch_log.compute_line([(0, "a", None), (1, "b", None)], 1.2) is None


def test_the_run_summary_names_each_straggler_most_often_first_or_none():
    per_epoch = [[(3, "node-b", 1.43)], [], [(3, "node-b", 1.31), (1, "node-a", 1.25)]]
    assert epoch_log.stragglers_over_run(per_epoch, 1.2) == (
        "stragglers over the run: rank 3 on node-b in 2 of 3 epochs (up to 1.43x the median "
        "rank); rank 1 on node-a in 1 of 3 epochs (up to 1.25x the median rank)"
    )
    assert epoch_log.stragglers_over_run([[], []], 1.2) == (
        "stragglers over the run: none in 2 epochs (no rank's compute reached 1.2x the median "
        "rank's)"
    )
    assert epoch_log.stragglers_over_run([], 1.2) is None
