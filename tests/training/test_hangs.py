"""No hang lasts: real processes under training.guard. An NCCL init that never completes and a
run that stops making steps each end within their deadline, naming the rank and its host, with
the Python stacks of the hung process dumped (faulthandler) and the retryable exit code 4; a
healthy run is left alone. Then two real Horovod workers under mpirun (`azdl train`), one of
which stops: both ranks' stacks are dumped."""

import os
import re
import signal
import time

import pytest

from azdl.jobs.retry import classify
from tests.training.azdl_command import azdl
from tests.training.guarded import run_guarded
from training import guard

# NCCL 2.27.5's own line (src/init.cc, ncclCommInitRankFunc) for a communicator being set up.
INIT_START = (
    "node-a:4127:4321 [0] NCCL INFO ncclCommInitRank comm 0x55d1c8a3e0a0 rank 1 nranks 2 "
    "cudaDev 0 nvmlDev 0 busId 1000 commId 0x6b1f0c8e2d4a9f37 - Init START"
)


STEPS_THEN_STUCK = """
import time
from training import heartbeat

def stuck_in_allreduce():
    time.sleep(300)

for step in range(1, 4):
    heartbeat.beat(step)
    time.sleep(1.1)
print("stepping stopped", flush=True)
stuck_in_allreduce()
"""


def test_an_nccl_init_that_never_completes_ends_within_its_deadline_naming_the_rank(tmp_path):
    code = (
        f"import time\nprint({INIT_START!r}, flush=True)\n"
        "def wait_for_peers():\n    time.sleep(300)\nwait_for_peers()\n"
    )
    run, took = run_guarded(tmp_path, code, "--init-deadline", "3")
    assert run.returncode == guard.HUNG, run.stderr
    assert took < 3 + guard.DUMP_GRACE_S, run.stderr
    host = os.uname().nodename
    assert (
        f"azdl: hang: rank 1 on {host}: NCCL's communicator set-up (Init START) has not "
        "completed after 3 s" in run.stderr
    )
    # faulthandler's dump of the hung process: where it was.
    assert "Fatal Python error: Aborted" in run.stderr
    assert re.search(r'File ".*rank\.py", line \d+ in wait_for_peers', run.stderr)
    # The dumped stack is a traceback; the guard's line makes the job a retry, naming the node.
    outcome = classify("Failed", "", run.stderr)
    assert outcome.retry and outcome.reason.startswith("the guard ended a hung rank"), outcome
    assert f"(on {host}: " in outcome.reason


@pytest.mark.slow
def test_a_run_that_stops_making_steps_ends_within_its_timeout_with_its_stack(tmp_path):
    run, took = run_guarded(tmp_path, STEPS_THEN_STUCK, "--progress-timeout", "3")
    assert run.returncode == guard.HUNG, run.stderr
    assert "stepping stopped" in run.stdout
    assert took < 3.3 + 3 + guard.DUMP_GRACE_S  # steps, then the timeout, then the dump
    host = os.uname().nodename
    assert re.search(
        rf"azdl: hang: rank 1 on {re.escape(host)}: no training step for \d+ s \(the last one "
        r"recorded was step 3\)",
        run.stderr,
    )
    assert re.search(r'File ".*rank\.py", line \d+ in stuck_in_allreduce', run.stderr)


def test_a_first_step_that_never_comes_ends_at_its_allowance(tmp_path):
    code = "import time\ndef loading_data():\n    time.sleep(300)\nloading_data()\n"
    run, _ = run_guarded(tmp_path, code, "--progress-timeout", "60", "--first-step-timeout", "2")
    assert run.returncode == guard.HUNG, run.stderr
    assert "no training step within 2 s of the start" in run.stderr
    assert "in loading_data" in run.stderr
    assert classify("Failed", "", run.stderr).retry


@pytest.mark.slow
def test_a_run_that_keeps_stepping_is_left_alone(tmp_path):
    code = (
        "import time\nfrom training import heartbeat\n"
        "for step in range(1, 16):\n    heartbeat.beat(step)\n    time.sleep(0.3)\n"
        "print('done', flush=True)\n"
    )
    run, _ = run_guarded(tmp_path, code, "--progress-timeout", "2", "--init-deadline", "2")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "done\n" and "hang" not in run.stderr


@pytest.mark.slow
def test_stopped_by_mpirun_during_a_stall_the_rank_still_dumps_its_stack(tmp_path):
    # Another rank's guard found the hang first; mpirun then signals this one.
    run, _ = run_guarded(tmp_path, STEPS_THEN_STUCK, "--progress-timeout", "8",
                         signal_after=3.3 + 4.5)  # fmt: skip
    assert "without a training step: dumping its stacks" in run.stderr, run.stderr
    assert re.search(r"line \d+ in stuck_in_allreduce", run.stderr)
    assert run.returncode == 128 + signal.SIGABRT


def test_stopped_while_stepping_the_signal_is_just_passed_on(tmp_path):
    code = (
        "import time\nfrom training import heartbeat\n"
        "for step in range(1, 100):\n    heartbeat.beat(step)\n    time.sleep(0.2)\n"
    )
    run, _ = run_guarded(tmp_path, code, "--progress-timeout", "8", signal_after=3)
    assert run.returncode == 128 + signal.SIGTERM, run.stderr
    assert "Fatal Python error" not in run.stderr and "dumping" not in run.stderr


# Two Horovod workers; rank 1 stops stepping at step 3 and rank 0 then waits for it in the next
# allreduce: neither makes a step again.
HOROVOD_HANG = """
import time
import torch
import horovod.torch as hvd
from training import heartbeat

hvd.init()

def rank_1_stuck():
    time.sleep(3600)

for step in range(1, 100):
    if hvd.rank() == 1 and step == 3:
        print(f"rank 1 stops at {time.time():.3f}", flush=True)
        rank_1_stuck()
    hvd.allreduce(torch.ones(1), name=f"step{step}")
    heartbeat.beat(step)
    time.sleep(0.5)
"""


@pytest.mark.slow
@pytest.mark.training_env
def test_two_real_workers_one_hung_end_with_both_ranks_stacks(tmp_path):
    (tmp_path / "hang.py").write_text(HOROVOD_HANG)
    timeout = 6
    run = azdl("train", "--script", "hang.py", "--workers", 2, "--transport", "mpi",
               "--progress-timeout", timeout, "--run-dir", tmp_path / "run", cwd=tmp_path,
               timeout=240)  # fmt: skip
    ended = time.time()
    output = run.stdout
    assert run.returncode != 0, output
    stopped = float(re.search(r"rank 1 stops at ([0-9.]+)", output).group(1))
    assert ended - stopped < timeout + guard.DUMP_GRACE_S + 20, output
    host = guard.host_of(tmp_path / "run" / "ranks", 1)
    assert f"hang: rank 1 on {host}: no training step for" in output
    assert re.search(r"line \d+ in rank_1_stuck", output)  # rank 1's stack
    # rank 0's stack: waiting in Horovod's allreduce (its own watchdog, or mpirun's signal).
    assert re.search(r"horovod/torch/mpi_ops\.py\", line \d+ in synchronize", output), output
