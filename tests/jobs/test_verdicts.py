"""The verdict of a failed multi-rank job comes from the rank that failed first, as its guard's
exit record says (training.exits); what other ranks report because it died never decides. The
lines are the tools' own: Gloo's and PyTorch's from a 2-node torchrun run on this machine
(torch 2.13 CPU, 2026-11-29), NCCL's and CUDA's from tests/jobs/data/faults (README there)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from azdl.jobs.retry import VERDICTS, classify
from training import exits, guard, teardown

FAULT_LOGS = Path(__file__).parent / "data" / "faults"
NON_ZERO = "JobFailed: Submitted script failed with a non-zero exit code"
# Rank 1 raised; rank 0's next collective failed (torch 2.13 prefixes a rank's traceback).
RANK1 = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/opt/azdl/training/torch/train.py", line 341, in run',
    "[rank1]:     result = trainer.step(data.train)",
    "[rank1]: ValueError: planted at step 6",
]
RANK0 = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/opt/azdl/training/torch/train.py", line 143, in step',
    "[rank0]: RuntimeError: Got the following error when running the callback: RuntimeError: "
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
    "by peer [127.0.0.1]:30875. This is typically caused by a remote worker crashing. Check the "
    "logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f",
]


def signs(lines, start=100.0):
    found = exits.Signs()
    for offset, line in enumerate(lines):
        found.feed(line, start + offset)
    return found.first


def record(rank, node, kind, line, at, round_=0, code=1, **extra):
    return exits.Record(rank=rank, node=node, round=round_, time=at, exit=code, signal=None,
                        kind=kind, line=line, **extra).text()  # fmt: skip


def test_a_ranks_own_exception_and_a_peers_report_are_told_apart():
    assert signs(RANK1) == (exits.USER, "ValueError: planted at step 6", 103.0)
    kind, line, _ = signs(RANK0)
    assert kind == exits.PEER and "Connection closed by peer" in line


def test_the_first_failure_decides_and_a_peers_report_never_does():
    logs = "\n".join([
        "epoch 2/3 ━━━━━━━━━━━━━━━━━━━━  2/4 0:00:03 loss 1.3958",
        record(0, "node-a", exits.PEER, signs(RANK0)[1], 1795937111.9),
        record(1, "node-b", exits.USER, "ValueError: planted at step 6", 1795937109.4),
    ])  # fmt: skip
    outcome = classify("Failed", NON_ZERO, logs)
    assert not outcome.retry
    assert outcome.reason == (
        "the script failed: rank 1 on node-b failed first, at 07:25:09 UTC: ValueError: planted "
        "at step 6; fix the code or its arguments, then submit again"
    )
    # Even when the peer's clock says its report came first, it does not decide.
    early = logs.replace("1795937111.9", "1795937100.0")
    assert classify("Failed", NON_ZERO, early) == outcome


def test_a_record_after_another_processs_unfinished_line_is_still_read():
    glued = "epoch 2/3 ━━━━ 2/4" + record(1, "node-b", exits.KILLED, "ended by SIGKILL", 5.0)
    outcome = classify("Failed", NON_ZERO, glued)
    assert outcome.retry and "rank 1 on node-b failed first" in outcome.reason


def test_a_killed_rank_is_a_lost_process_and_its_peers_errors_do_not_matter():
    logs = "\n".join([
        record(0, "node-a", exits.PEER, "RuntimeError: ... Connection closed by peer", 12.0),
        record(1, "node-b", exits.KILLED, "ended by SIGKILL", 10.0, code=137),
    ])  # fmt: skip
    outcome = classify("Failed", NON_ZERO, logs)
    assert outcome.retry and outcome.reason.startswith("a process was lost")
    assert "rank 1 on node-b failed first" in outcome.reason


def test_nccls_words_after_a_peer_died_lose_to_the_peers_own_error():
    # Rank 9's NCCL log when its InfiniBand peer went away: NCCL's network warning first.
    lines = (FAULT_LOGS / "nccl_ib_remote_error.log").read_text().splitlines()
    kind, line, _ = signs(lines, start=200.0)
    assert kind == exits.NETWORK and "NET/IB" in line
    logs = "\n".join([
        record(9, "node-2", kind, line, 200.0),
        record(4, "node-1", exits.USER, "KeyError: 'labels'", 199.5),
    ])  # fmt: skip
    assert not classify("Failed", NON_ZERO, logs).retry
    # On its own, it is the network's fault, and the node is named.
    alone = classify("Failed", NON_ZERO, record(9, "node-2", kind, line, 200.0))
    assert alone.retry and alone.reason.startswith(
        'an NCCL network or system error (on node-2: docs/jobs.md, "A bad node")'
    )


def test_a_gpu_fault_is_the_nodes_even_in_a_traceback():
    lines = (FAULT_LOGS / "ecc_uncorrectable.log").read_text().splitlines()
    kind, line, _ = signs(lines)
    assert kind == exits.HARDWARE
    assert line == "torch.AcceleratorError: CUDA error: uncorrectable ECC error encountered"
    # Xid 79's kernel line after a CUDA error that a bug could raise too: the GPU fault wins.
    xid = (FAULT_LOGS / "xid79_kernel.log").read_text().splitlines()
    assert signs(xid)[0] == exits.HARDWARE


def test_a_post_mortem_that_found_a_lost_gpu_makes_the_job_a_retry_naming_the_node():
    found = ["7 GPUs visible, the VM size has 8"]
    logs = record(3, "node-1", exits.USER, "RuntimeError: CUDA error: unknown error", 50.0,
                  post_mortem=found)  # fmt: skip
    outcome = classify("Failed", NON_ZERO, logs)
    assert outcome.retry
    assert outcome.reason == (
        'a GPU fault (on node-1: docs/jobs.md, "A bad node"): the post-mortem on node-1 found '
        "7 GPUs visible, the VM size has 8"
    )


def test_the_last_restart_round_decides():
    logs = "\n".join([
        record(1, "node-b", exits.KILLED, "ended by SIGKILL", 10.0, code=137),
        record(0, "node-a", exits.USER, "ValueError: bad batch", 30.0, round_=1),
    ])  # fmt: skip
    assert not classify("Failed", NON_ZERO, logs).retry


def test_only_reports_of_a_lost_peer_mean_a_rank_vanished():
    # A node lost with its guard: the others only saw it go.
    logs = record(0, "node-a", exits.PEER, "RuntimeError: ... Connection closed by peer", 12.0)
    outcome = classify("Failed", NON_ZERO, logs)
    assert outcome.retry and outcome.reason.startswith("a rank lost its peers, and no rank's own")


def test_a_rendezvous_timeout_is_transient_and_named():
    # torch 2.13's c10d backend when node 0's store was not reached in time.
    text = (
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to "
        "the C10d store has failed. See inner exception for details.\n"
    )
    outcome = classify("Failed", NON_ZERO, text)
    assert outcome.retry
    assert outcome.reason.startswith(
        "the nodes' rendezvous did not complete (RendezvousConnectionError)"
    )
    closed = "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n"
    assert not classify("Failed", NON_ZERO, closed).retry  # closed on purpose: not a timeout


def test_the_signs_of_a_teardown_abort_and_an_error_line():
    assert signs(["terminate called without an active exception"])[0] == exits.TEARDOWN
    line = "python -m training.torch.train: error: --epochs: expected at least 1"
    assert signs([line]) == (exits.USER, line, 100.0)
    # A chained exception: the first one, the cause of the others, is the one kept.
    chained = [*RANK1, "", "During handling of the above exception, another exception occurred:",
               "", "Traceback (most recent call last):", '  File "x.py", line 3, in <module>',
               "OSError: [Errno 28] No space left on device"]  # fmt: skip
    assert signs(chained)[1] == "ValueError: planted at step 6"


def test_an_abort_at_a_ranks_end_is_not_retried_and_names_the_cure():
    """Every attempt of the script would race the same way (training/teardown.py)."""
    logs = "\n".join([
        record(0, "node-a", exits.TEARDOWN, teardown.TEARDOWN_ABORT, 1795937109.4, code=134),
        record(1, "node-b", exits.PEER, signs(RANK0)[1], 1795937111.9),
    ])  # fmt: skip
    outcome = classify("Failed", NON_ZERO, logs)
    assert not outcome.retry
    assert outcome.reason == (
        "a rank aborted as its process ended (std::terminate): rank 0 on node-a failed first, at "
        f"07:25:09 UTC: {teardown.TEARDOWN_ABORT}; {teardown.CURE}"
    )


def test_a_desync_is_the_scripts_bug_though_every_rank_only_timed_out():
    # Both ranks' Gloo timeout (a peer's sign), then the flight recorder's finding.
    timed_out = (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete"
    )
    assert signs([timed_out])[0] == exits.PEER
    logs = "\n".join([
        record(0, "node-a", exits.PEER, timed_out, 10.0),
        record(1, "node-b", exits.PEER, timed_out, 10.1),
        "azdl: desync at collective 5 of process group 0: rank 0 on node-a called all_reduce "
        "(input sizes [[4]], dtypes ['Float']; output sizes [[4]], dtypes ['Float']); rank 1 on "
        "node-b called broadcast (input sizes [[4]], dtypes ['Float']; output sizes [[4]], "
        "dtypes ['Float'])",
    ])  # fmt: skip
    outcome = classify("Failed", NON_ZERO, logs)
    assert not outcome.retry
    assert outcome.reason.startswith("the ranks called different collectives (the flight "
                                     "recorder's desync at collective 5")  # fmt: skip


def test_gloos_own_mismatch_check_is_the_scripts_bug():
    # torch 2.13's Gloo when a peer's bytes do not fit the collective (an uncaught C++ error).
    lines = [
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
        "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:456] op.preamble.length <= op.nbytes. 16 vs 4. Received data size doesn't match "
        "expected size. Is there a distributed collective mismatch in your code?",
    ]
    kind, line, _ = signs(lines)
    assert kind == exits.USER and line.startswith("what():  [enforce fail")


# Open MPI 4.1.4's own words when a process failed, as mpirun printed them on this machine.
MPI_EXIT = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[9310,1],1]
  Exit code:    3
--------------------------------------------------------------------------
"""
MPI_SIGNAL = """--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""


def test_without_records_mpiruns_first_process_is_named():
    outcome = classify("Failed", NON_ZERO, "\n".join(RANK1) + "\n" + MPI_EXIT)
    assert not outcome.retry
    assert outcome.reason.startswith(
        "the script raised a Python exception (mpirun: rank 1 first, exit code 3)"
    )
    killed = classify("Failed", NON_ZERO, MPI_SIGNAL)
    assert killed.retry and killed.reason.startswith("a process was lost")
    assert killed.reason.endswith("(mpirun: rank 1 on vm first, signal 9)")


@pytest.mark.slow  # starts the labeller
def test_the_guards_stop_lines_are_read_though_torchrun_labels_them(tmp_path):
    """Under torchrun each worker's lines reach the node's log labelled with its rank by
    training.rank_output (`[1]<stderr>:azdl: ...`); the guard's stop lines still decide and
    name the node when no exit record was printed."""
    lines = (
        (exits.INFINIBAND_STOP, f"{guard.IB_STOP_LINE} rank 1 on node-7: NCCL fell back to TCP"),
        (exits.HANG, f"{guard.HANG_LINE} rank 1 on node-7: no training step for 900 s"),
    )
    for kind, words in lines:
        line = f"{guard.PREFIX} {words}"
        script = tmp_path / "say.py"
        script.write_text(f"import sys; print({line!r}, file=sys.stderr)\n")
        labelled = subprocess.run(
            [sys.executable, "-m", "training.rank_output", "--", sys.executable, str(script)],
            env=os.environ | {"RANK": "1"}, capture_output=True, text=True, check=True,
        ).stderr  # fmt: skip
        assert labelled.startswith("[1]<stderr>:azdl: ")
        outcome = classify("Failed", NON_ZERO, labelled)
        assert outcome.retry, outcome
        assert outcome.reason.startswith(
            VERDICTS[kind][1] + ' (on node-7: docs/jobs.md, "A bad node")'
        )


def test_a_traceback_is_read_on_its_own_stream_while_the_other_prints():
    found = exits.Signs()
    found.feed("Traceback (most recent call last):", 1.0, "stderr")
    found.feed("epoch 1/1 - loss: 1.3814", 1.1, "stdout")  # another thread's line, between
    found.feed('  File "train.py", line 3, in <module>', 1.2, "stderr")
    found.feed("ValueError: planted at step 4", 1.3, "stderr")
    assert found.first == (exits.USER, "ValueError: planted at step 4", 1.3)
