"""The fault matrix (issue 34): each fault planted in the command an Azure ML job runs, run as
2 "nodes" on this machine under both launchers (harness.py says what stands in for what), and
the verdict `azdl submit --max-retries` gives: retried or not, the reason, the rank and node it
names, the seconds from the fault to the job's end, and no torchrun restart in vain.

With AZDL_FAULT_MATRIX_RESULTS=FILE the rows go to FILE (docs/jobs.md's table is generated from
tests/jobs/fault_matrix/results.json). AZDL_FAULT_MATRIX_SKEW_S sets how late node 0 starts
(default 90, above torch's default read_timeout of 60 s; the issue's 300 s passes too, run by
hand: docs/jobs.md, The fault matrix)."""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.jobs.failed_jobs import PREEMPTED
from tests.jobs.fault_matrix import harness
from training import exits

pytestmark = pytest.mark.slow

SKEW_S = float(os.environ.get("AZDL_FAULT_MATRIX_SKEW_S", "90"))
RESULTS = os.environ.get("AZDL_FAULT_MATRIX_RESULTS")
BAD_NODE = "node-1"  # where each planted fault fires
SOCKET_LOG = Path(__file__).parents[2] / "training" / "nccl_logs" / "composed_ib_socket.log"

# Runs in every Python process of both nodes; a fault fires in the training worker on BAD_NODE
# at its FAULT_STEP-th step (training.heartbeat, which every built-in flavour calls per step).
PRELUDE = f"""
import os, signal, socket, sys, time
ROOT = {harness.ROOT_ENV!r}

def fired(what):
    print(f"{harness.FAULT_MARK}{{time.time():.3f}} ({{what}})", flush=True)

def at_step(action, step={harness.FAULT_STEP}):
    if socket.gethostname() != {BAD_NODE!r}:
        return
    import training.heartbeat as heartbeat
    beat = heartbeat.beat
    def faulty(n):
        if n == step:
            action()
        beat(n)
    heartbeat.beat = faulty
"""


FAULTS = {
    "value_error": harness.Fault(
        "a ValueError on one rank",
        PRELUDE
        + """
def act():
    fired("ValueError")
    raise ValueError("planted at step 4")
at_step(act)
""",
    ),
    "sigkill": harness.Fault(
        "a rank SIGKILLed mid-epoch",
        PRELUDE
        + """
def act():
    fired("SIGKILL")
    os.kill(os.getpid(), signal.SIGKILL)
at_step(act)
""",
    ),
    "skew": harness.Fault(f"node 0 starting {SKEW_S:g} s after node 1", delays={0: SKEW_S}),
    # The rank's process freezes (as behind a hung driver); the other waits inside its next
    # collective. The guard's step watchdog (--progress-timeout) ends both.
    "hang": harness.Fault(
        "a rank that hangs while the other waits in a collective",
        PRELUDE
        + """
def act():
    fired("SIGSTOP")
    os.kill(os.getpid(), signal.SIGSTOP)
at_step(act)
""",
        request={"progress_timeout": 20},
    ),
    # Rank 1's next all_reduce after the fault step is a broadcast of the same tensor: both ranks
    # wait inside collective N until the collective timeout; the flight recorder shows both.
    "desync": harness.Fault(
        "a desync (one rank calls another collective)",
        PRELUDE
        + """
def act():
    import torch.distributed as dist
    real = dist.all_reduce
    def other(tensor, *args, **kwargs):
        dist.all_reduce = real
        fired("broadcast instead of all_reduce")
        return dist.broadcast(tensor, 0, async_op=kwargs.get("async_op", False))
    dist.all_reduce = other
at_step(act)
""",
        request={"stall_timeout": 45},
    ),
    "gate": harness.Fault(
        "the health gate failing on one node",
        vm_size=harness.GPU_SIZE,
        nvidia_smi={"bad_host": BAD_NODE, "bad_gpus": "nvidia_smi_seven_gpus.txt"},
        request={"health_check": True},
    ),
    "lost_gpu": harness.Fault(
        "a GPU lost after a crash",
        PRELUDE
        + """
def act():
    open(os.environ[ROOT] + "/gpu-lost", "w").close()
    fired("CUDA error")
    raise RuntimeError("CUDA error: unspecified launch failure")
at_step(act)
""",
        vm_size=harness.GPU_SIZE,
        nvidia_smi={
            "bad_host": BAD_NODE,
            "bad_gpus": "nvidia_smi_seven_gpus.txt",
            "after": "gpu-lost",
        },
    ),
    # NCCL's own start-up lines of a rank that fell back to TCP sockets (a composed log in
    # NCCL's order, tests/training/nccl_logs), printed by the rank at its first step: the
    # guard's InfiniBand check stops it. torchrun may restart once: it must not.
    "infiniband": harness.Fault(
        "the InfiniBand stop",
        PRELUDE
        + f"""
def act():
    fired("NCCL over sockets")
    for line in open({str(SOCKET_LOG)!r}):
        if not line.startswith("#"):
            print(line, end="", flush=True)
    time.sleep(30)
at_step(act, step=1)
""",
        vm_size=harness.GPU_SIZE,
        request={"max_restarts": 1},
    ),
    "finished": harness.Fault("a run that finished"),
}
TORCHRUN_ONLY = {"skew", "desync"}  # a rendezvous, PyTorch's flight recorder
# Under torchrun the skewed run is also the finished one (it must end in exit 0, never
# retried): one run fewer for the suite's CPU time.
SAME_RUN = {("finished", "torchrun"): "skew"}


@dataclass(frozen=True)
class Expected:
    retry: bool
    reason: str  # how the reason starts
    says: str = ""  # the line that matters, in the reason
    names: str | None = "rank"  # the reason names the bad node ("node") and its rank ("rank")
    seconds: float = 90.0  # at most, from the fault to the job's end (a loaded 2-core machine)


EXPECTED = {
    "value_error": Expected(False, "the script failed: rank ", "ValueError: planted at step 4"),
    "sigkill": Expected(True, "a process was lost", "ended by SIGKILL"),
    "skew": Expected(False, "completed", names=None, seconds=SKEW_S + 300),
    "hang": Expected(
        True, "the guard ended a hung rank", "no training step for", names=None, seconds=20 + 90
    ),
    "desync": Expected(
        False,
        "the ranks called different collectives",
        "called all_reduce (input sizes",
        names=None,
        seconds=45 + 90,
    ),
    "gate": Expected(True, "the pre-flight health gate failed", names="node"),
    "lost_gpu": Expected(True, "a GPU fault", "7 GPUs visible, the VM size has 8", names="node"),
    "infiniband": Expected(
        True, "the guard stopped a rank: InfiniBand", "NCCL fell back to TCP sockets"
    ),
    "finished": Expected(False, "completed", names=None, seconds=300),
}
CASES = [(f, launcher) for f in FAULTS for launcher in ("torchrun", "horovod")
         if not (launcher == "horovod" and f in TORCHRUN_ONLY)]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The runs of the module, by (fault, launcher), each run once."""
    done: dict = {}

    def get(fault: str, launcher: str) -> harness.Run:
        fault = SAME_RUN.get((fault, launcher), fault)
        if (fault, launcher) not in done:
            root = tmp_path_factory.mktemp(f"{fault}-{launcher}")
            done[fault, launcher] = harness.run(FAULTS[fault], launcher, root)
        return done[fault, launcher]

    return get


@pytest.fixture(scope="module")
def rows():
    """Every row's result; written to RESULTS at the end when asked."""
    found: list[dict] = []
    yield found
    if RESULTS:
        command = ("AZDL_FAULT_MATRIX_RESULTS=tests/jobs/fault_matrix/results.json "
                   f"AZDL_FAULT_MATRIX_SKEW_S={SKEW_S:g} .venv/bin/python -m pytest "
                   "tests/jobs/fault_matrix")  # fmt: skip
        harness.write_results(Path(RESULTS), harness.results_header(command), found)


@pytest.mark.parametrize(("fault", "launcher"), CASES, ids=[f"{f}-{how}" for f, how in CASES])
def test_the_fault_gets_its_verdict(fault, launcher, rows, runs):
    spec = FAULTS[fault]
    run = runs(fault, launcher)
    status, outcome = harness.outcome_of(run)
    expected = EXPECTED[fault]
    output = "\n".join(
        f"--- node {i} (exit {code})\n{log[-6000:]}"
        for i, (code, log) in enumerate(zip(run.codes, run.logs, strict=True))
    )
    records = exits.parse("\n".join(run.logs))
    bad = [r for r in records if r.node == BAD_NODE]
    assert outcome.retry is expected.retry, f"{outcome}\n{output}"
    assert outcome.reason.startswith(expected.reason), f"{outcome}\n{output}"
    assert expected.says in outcome.reason, f"{outcome}\n{output}"
    if expected.names == "node":
        assert BAD_NODE in outcome.reason, f"{outcome}\n{output}"
    if expected.names == "rank":  # the rank that ran on the bad node
        assert f"rank {bad[0].rank} on {BAD_NODE}" in outcome.reason, f"{outcome}\n{output}"
    assert not harness.restarted(run), output  # nothing restarted in vain
    seconds = run.seconds()
    assert seconds <= expected.seconds, f"{seconds} s\n{output}"
    if fault in ("skew", "finished"):
        assert run.codes == [0] * len(run.codes), output
        assert harness.stack_traces(run) == [], output  # no stack trace on the way
    if fault == "desync":
        assert "azdl: desync at collective" in "\n".join(run.logs), output
    rows.append({
        "fault": spec.name, "launcher": launcher, "status": status, "retry": outcome.retry,
        "reason": outcome.reason, "rank": bad[0].rank if bad else None,
        "seconds": seconds,
    })  # fmt: skip


def test_a_preempted_node_is_retried(rows):
    """Azure ML's own error for a pre-empted node (Azure/MachineLearningNotebooks#1242), as
    azure-ai-ml's stream raises it; no process of ours ran."""
    outcome = harness.verdict("Failed", PREEMPTED, {})
    assert outcome.retry and outcome.reason == "a node was pre-empted"
    rows.append(
        {
            "fault": "Azure ML's pre-emption",
            "launcher": "either",
            "status": "Failed",
            "retry": True,
            "reason": outcome.reason,
            "rank": None,
            "seconds": None,
        }
    )


def test_the_committed_results_cover_every_fault():
    """docs/jobs.md's table comes from results.json: it has a row for every case here."""
    committed = json.loads((Path(__file__).parent / "results.json").read_text())
    rows = {(r["fault"], r["launcher"]) for r in committed["rows"]}
    assert rows >= {(FAULTS[f].name, launcher) for f, launcher in CASES}
    assert {"date", "machine", "commit", "command"} <= committed.keys()
