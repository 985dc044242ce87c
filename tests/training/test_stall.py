"""Hangs end and are named: `azdl train --stall-timeout` on 2 real workers where rank 1 stops
calling collectives, and the guard's reading of Horovod's stall inspector."""

import argparse
import os
import re
import subprocess
import sys
import time

import pytest

from azdl.commands import train
from azdl.envs import PACKAGES_ROOT
from azdl.errors import AzdlError
from azdl.jobs import safeguards
from tests.training.azdl_command import azdl
from training import guard

# Rank 1 leaves the job after the first allreduce; rank 0 waits for it in the second.
STALLING_SCRIPT = """
import time
import torch
import horovod.torch as hvd

hvd.init()
hvd.allreduce(torch.ones(1), name="warm_up")
if hvd.rank() == 1:
    print(f"rank 1 stops at {time.time():.3f}", flush=True)
    time.sleep(3600)
hvd.allreduce(torch.ones(1), name="after_the_stall")
print("not reached", flush=True)
"""


@pytest.mark.slow
@pytest.mark.training_env
def test_a_rank_that_stops_calling_collectives_ends_the_run_named_within_the_timeout(tmp_path):
    (tmp_path / "stall.py").write_text(STALLING_SCRIPT)
    timeout = 10
    run = azdl("train", "--script", "stall.py", "--workers", 2, "--stall-timeout", timeout,
               "--run-dir", tmp_path / "run", cwd=tmp_path, timeout=180)  # fmt: skip
    ended = time.time()
    output = run.stdout
    assert run.returncode != 0, output
    assert "not reached" not in output
    stopped = float(re.search(r"rank 1 stops at ([0-9.]+)", output).group(1))
    # Horovod checks for stalls every few seconds; MPI then takes the job down.
    assert ended - stopped < timeout + 15, output
    host = guard.host_of(tmp_path / "run" / "ranks", 1)
    assert not host.startswith("host unknown"), output
    assert f"stall: rank 1 on {host} has not submitted allreduce.after_the_stall" in output
    assert f"Horovod shut the job down on a stall: rank(s) 1 ({host})" in output


def _args(*argv):
    parser = argparse.ArgumentParser(prog="azdl")
    train.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", *argv])


def test_stall_timeout_picks_horovods_mpi_transport_and_refuses_gloo():
    assert train.launcher_of(_args()) == ("horovod", "gloo")
    assert train.launcher_of(_args("--stall-timeout", "30")) == ("horovod", "mpi")
    assert train.launcher_of(_args("--transport", "mpi", "--stall-timeout", "30")) == (
        "horovod", "mpi",
    )  # fmt: skip
    with pytest.raises(AzdlError, match="stall inspector does not fire under `horovodrun --gloo`"):
        train.launcher_of(_args("--transport", "gloo", "--stall-timeout", "30"))


def test_stall_environment_warns_at_half_the_timeout_and_shuts_down_at_it():
    assert safeguards.stall_environment(600) == {
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "60",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "600",
    }
    assert safeguards.stall_environment(10)["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "5"
    assert safeguards.stall_environment(None) == {}
    with pytest.raises(AzdlError, match="at least 2 seconds"):
        safeguards.stall_environment(1)


# Horovod 0.28.1's stall inspector as rank 0 printed it here under mpirun (stall_inspector.cc).
HOROVOD_STALL_LOG = """\
[2026-11-24 19:32:54.574232: E /tmp/horovod-0.28.1/horovod/common/stall_inspector.cc:105] One or \
more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are \
waiting for remainder of ranks for more than 5 seconds. This may indicate that different ranks \
are trying to submit different tensors or that only subset of ranks is submitting tensors, which \
will cause deadlock.
Missing ranks:
1!: [allreduce.stuck]
3: [allreduce.stuck, broadcast.weights]
One or more rank (marked by "!") is stalled for longer than 10 seconds. Will shutdown.
"""


def test_the_guard_names_every_missing_rank_with_its_host(tmp_path, capsys):
    ranks = tmp_path / "ranks"
    guard.record_host(ranks, 1, "node-b")
    guard.record_host(ranks, 3, "node-d")
    watch = guard.Watch(guard.parse_args(["--ranks-dir", str(ranks), "--", "true"]), 0, "node-a")
    for line in HOROVOD_STALL_LOG.splitlines():
        assert watch.line(line)  # every line still reaches the log
    watch.summary()
    err = capsys.readouterr().err
    assert "stall: rank 1 on node-b has not submitted allreduce.stuck" in err
    assert "stall: rank 3 on node-d has not submitted allreduce.stuck, broadcast.weights" in err
    assert "Horovod shut the job down on a stall: rank(s) 1 (node-b), 3 (node-d)" in err


def test_the_guard_passes_the_exit_code_on_and_runs_the_command(tmp_path):
    code = "import sys; print('hello'); sys.exit(7)"
    run = subprocess.run(
        [sys.executable, "-m", "training.guard", "--ranks-dir", tmp_path, "--",
         sys.executable, "-c", code],
        env=os.environ | {"OMPI_COMM_WORLD_RANK": "2", "PYTHONPATH": str(PACKAGES_ROOT)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 7 and run.stdout == "hello\n", run.stderr
    assert guard.host_of(tmp_path, 2) == os.uname().nodename
    assert f"azdl: rank 2 on {os.uname().nodename}" in run.stderr
