"""`azdl submit --max-retries N`: whether a job that ended should be resubmitted from its last
checkpoint (`azdl.jobs.submit` follows and resubmits it). The rank that failed first decides,
from the exit records every rank's guard prints (training.exits); what other ranks report
because it died never does. The sources of each pattern are listed in docs/architecture.md,
"Retries"."""

import re
import time
from dataclasses import dataclass

from azdl.jobs.own_environment import MISSING_RUNTIME, MISSING_TOPOLOGY
from training import exits, guard, teardown
from training.health.gate import PREFIX as GATE
from training.rank_output import LABEL

# Where a line of the gate's or the guard's starts: under torchrun a worker's lines (the guard's
# and the script's) come labelled with its rank, `[1]<stderr>:` (training.rank_output), in the
# node's log as Azure ML keeps it; the gate runs before torchrun, unlabelled.
START = rf"^(?:{LABEL})?"

# Azure ML's error for a pre-empted low-priority node (Azure/MachineLearningNotebooks#1242).
PREEMPTED = re.compile(r"PreemptionError|got pre-empted", re.I)
# training/health/gate.py's verdict: the next attempt may get other nodes.
GATE_FAILED = re.compile(rf"{START}{GATE} FAIL", re.M)
# torchrun's rendezvous not completing: its timeout, or node 0's store not reached in
# read_timeout (torch 2.13 torch/distributed/elastic/rendezvous/api.py; raised from
# dynamic_rendezvous.py and c10d_rendezvous_backend.py `_create_tcp_store`). A rendezvous
# closed on purpose (RendezvousClosedError: a stop on another node, below) is not one.
RENDEZVOUS_FAILED = re.compile(r"\b(RendezvousTimeoutError|RendezvousConnectionError)\b")
# Open MPI 4.1's words for the first process that failed (orterun's help texts, as mpirun
# 4.1.4 printed them here): an exit code, or a signal.
MPI_FIRST = re.compile(
    r"The first process to do so was:\s+Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]\s+"
    r"Exit code:\s+(?P<code>\d+)|mpirun noticed that process rank (?P<srank>\d+) with PID \d+ "
    r"on node (?P<node>\S+) exited on signal (?P<signal>\d+)"
)

# What the first failure's kind means for the job: retried, and the reason's words.
VERDICTS = {
    exits.USER: (False, "the script failed"),
    exits.HARDWARE: (True, "a GPU fault"),
    exits.NETWORK: (True, "an NCCL network or system error"),
    exits.INFINIBAND_STOP: (
        True,
        "the guard stopped a rank: InfiniBand or GPUDirect RDMA missing on its node",
    ),
    exits.HANG: (
        True,
        "the guard ended a hung rank (NCCL init deadline or no training step in time)",
    ),
    exits.KILLED: (
        True,
        "a process was lost (a signal nobody in the job sent: the out-of-memory killer, the node)",
    ),
    # Not retried: the script's process group outlived it, and every attempt would race the same.
    exits.TEARDOWN: (False, "a rank aborted as its process ended (std::terminate)"),
}
# Kinds that are the node's fault, not the rank's: the reason names the node.
NODE_KINDS = (exits.HARDWARE, exits.NETWORK, exits.INFINIBAND_STOP, exits.HANG)
USER_ADVICE = "fix the code or its arguments, then submit again"

# Without exit records (a job of an older azdl, a step before training): the log's signs,
# the node's faults before the user's, the user's before those a peer's end causes.
TRANSIENT = (
    *((pattern, words) for kind, pattern, words in exits.SIGNS if kind == exits.HARDWARE),
    (
        re.compile(rf"{START}{guard.PREFIX} {guard.IB_STOP_LINE} ", re.M),
        VERDICTS[exits.INFINIBAND_STOP][1],
    ),
    (re.compile(rf"{START}{guard.PREFIX} {guard.HANG_LINE} ", re.M), VERDICTS[exits.HANG][1]),
    (exits.NETWORK_SIGN, VERDICTS[exits.NETWORK][1]),
)
# The nodes that the gate and the guard name in their stop lines ("... node HOST is unhealthy",
# "... rank N on HOST: ...").
BAD_NODE = re.compile(
    rf"{START}{GATE} FAIL node (?P<gate>\S+) is unhealthy|{START}{guard.PREFIX} "
    rf"(?:{guard.IB_STOP_LINE}|{guard.HANG_LINE}) rank \S+ on (?P<guard>[^:\s]+)",
    re.M,
)
USER_CODE = (
    (re.compile(r"Traceback \(most recent call last\)"), "the script raised a Python exception"),
    # (a label, when there is one, is part of the \S+)
    (re.compile(r"^(usage: .*\n)?\S+: error: ", re.M), "the script rejected its arguments"),
)
# Azure/MachineLearningNotebooks#1360: the script exited non-zero; said of any failed command,
# so it decides only when no other sign is there.
NON_ZERO_EXIT = re.compile(r"Submitted script failed with a non-zero exit code")
# The first step of a job on a team's own environment (azdl.jobs.own_environment): the line that
# says what the environment lacks and how to add it. Running the job again cannot help.
OWN_ENVIRONMENT = re.compile(
    rf"(?:{re.escape(MISSING_RUNTIME)}|{re.escape(MISSING_TOPOLOGY)}) [^\n]*"
)
# training.flight_recorder's finding that the ranks called different collectives.
DESYNC = re.compile(r"azdl: (?:\(restart round \d+\) )?(desync at collective .*)")
PEER_LOST = "a rank lost its peers, and no rank's own failure was recorded: a lost process or node"


@dataclass(frozen=True)
class Outcome:
    retry: bool
    reason: str


def classify(status: str, error: str, logs: str) -> Outcome:
    """Whether a job that ended in `status` is worth running again, and why."""
    if status == "Completed":
        return Outcome(False, "completed")
    if status == "Canceled":
        return Outcome(False, "cancelled (by a person or a time limit)")
    if status == "NotResponding":
        return Outcome(True, "Azure ML lost contact with the job (NotResponding)")
    text = f"{error}\n{logs}"
    if PREEMPTED.search(text):
        return Outcome(True, "a node was pre-empted")
    if GATE_FAILED.search(text):
        return Outcome(True, "the pre-flight health gate failed" + bad_nodes(text))
    records = last_round(exits.parse(logs))
    if lost_gpu := [r for r in records if r.post_mortem]:
        first = min(lost_gpu, key=lambda r: r.time)
        return Outcome(True, f"a GPU fault{on_node(first.node)}: the post-mortem on "
                       f"{first.node} found {'; '.join(first.post_mortem)}")  # fmt: skip
    causes = sorted((r for r in records if r.kind in VERDICTS), key=lambda r: r.time)
    if causes:
        return verdict(causes[0])
    if desync := DESYNC.search(logs):
        return Outcome(False, f"the ranks called different collectives (the flight recorder's "
                       f"{desync.group(1)}); {USER_ADVICE}")  # fmt: skip
    if RENDEZVOUS_FAILED.search(text):
        found = RENDEZVOUS_FAILED.search(text).group(1)
        return Outcome(True, f"the nodes' rendezvous did not complete ({found}): a node started "
                       "late, or never (docs/torchrun.md, Rendezvous)")  # fmt: skip
    if failed := sorted((r for r in records if r.kind != exits.FINISHED), key=lambda r: r.time):
        first = failed[0]
        return Outcome(True, f"{PEER_LOST}: {first.where()} first, at {clock(first)}: "
                       f"{first.line}")  # fmt: skip
    return from_signs(status, text)


def last_round(records: list[exits.Record]) -> list[exits.Record]:
    """The records of torchrun's last restart round with a failure: a restarted run that failed
    again decides by its own first failure."""
    failed = [r.round for r in records if r.kind != exits.FINISHED]
    return [r for r in records if r.round == max(failed)] if failed else records


def verdict(first: exits.Record) -> Outcome:
    retry, what = VERDICTS[first.kind]
    where = f"{first.where()} failed first, at {clock(first)}"
    if first.kind in NODE_KINDS:
        return Outcome(retry, f"{what}{on_node(first.node)}: {where}: {first.line}")
    if first.kind == exits.TEARDOWN:
        return Outcome(False, f"{what}: {where}: {first.line}; {teardown.CURE}")
    if not retry:
        return Outcome(False, f"{what}: {where}: {first.line}; {USER_ADVICE}")
    return Outcome(True, f"{what}: {where}: {first.line}")


def clock(record: exits.Record) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(record.time)) + " UTC"


def on_node(node: str) -> str:
    return f' (on {node}: docs/jobs.md, "A bad node")'


def from_signs(status: str, text: str) -> Outcome:
    """The verdict from the log's words alone (no exit records)."""
    for pattern, reason in TRANSIENT:
        if pattern.search(text):
            return Outcome(True, reason + bad_nodes(text) + mpi_first(text))
    if lacking := OWN_ENVIRONMENT.search(text):
        return Outcome(False, lacking.group(0).removeprefix("azdl: "))
    for pattern, reason in USER_CODE:
        if pattern.search(text):
            return Outcome(False, f"{reason}{mpi_first(text)}: {USER_ADVICE}")
    if exits.PEER_SIGN.search(text):
        return Outcome(True, PEER_LOST + mpi_first(text))
    if (first := MPI_FIRST.search(text)) and first.group("signal"):
        return Outcome(True, VERDICTS[exits.KILLED][1] + mpi_first(text))
    if NON_ZERO_EXIT.search(text):
        return Outcome(False, f"the script exited non-zero{mpi_first(text)}: {USER_ADVICE}")
    return Outcome(False, f"{status} for a reason not recognised as transient (see its logs)")


def mpi_first(text: str) -> str:
    """mpirun's first failed process, as words to add to the reason ("" if none)."""
    found = MPI_FIRST.search(text)
    if found is None:
        return ""
    if found.group("signal"):
        return (f" (mpirun: rank {found.group('srank')} on {found.group('node')} first, signal "
                f"{found.group('signal')})")  # fmt: skip
    return f" (mpirun: rank {found.group('rank')} first, exit code {found.group('code')})"


def bad_nodes(text: str) -> str:
    """The nodes the gate or the guard named, as words to add to the reason ("" if none)."""
    nodes = sorted({m.group("gate") or m.group("guard") for m in BAD_NODE.finditer(text)})
    if not nodes:
        return ""
    return f' (on {", ".join(nodes)}: docs/jobs.md, "A bad node")'
