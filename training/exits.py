"""A rank's exit record: how training.guard saw its command end (rank, node, torchrun's restart
round, the time of the failure, exit code or signal) and the first sign in its output that says
why, as one of the kinds below. `azdl.jobs.retry` reads the records of every rank and lets the
first failure in time decide; a sign that a rank shows because another rank died never decides.
Stdlib only: the guard runs it in every rank, `azdl` in the operator environment.

The guard prints each record on stderr as one line, `azdl: exit {JSON}` (the job's own logs,
which `azdl submit --max-retries` downloads), and writes it beside the rank's host record as
`exit-<rank>-round-<round>.json` (the job's logs folder).
"""

import json
import re
import signal
from dataclasses import asdict, dataclass

from training.teardown import TEARDOWN_ABORT

LINE = "azdl: exit "
# A record's kind: what ended the rank.
FINISHED = "finished"  # exit 0
USER = "user"  # the script's own error (its exception's last line, an `error:` line)
HARDWARE = "hardware"  # a GPU fault the driver or CUDA reported
NETWORK = "network"  # NCCL's own system or InfiniBand error on this rank
INFINIBAND_STOP = "infiniband"  # the guard's InfiniBand check stopped it (exit 3)
HANG = "hang"  # the guard's init deadline or progress watchdog ended it (exit 4)
KILLED = "killed"  # a signal nobody in the job sent it (SIGKILL: the OOM killer, the node)
TEARDOWN = "teardown"  # std::terminate at the process's end (SIGABRT)
PEER = "peer"  # an error that another rank's end causes (below): never decides
STOPPED = "stopped"  # its launcher (torchrun, mpirun) stopped it after another's failure
# Kinds that say "another rank failed", not why.
CONSEQUENCES = (PEER, STOPPED)

# Signs in a rank's output, by kind, with what each says; a line may carry a prefix such as
# torch's "[rank1]: ". Looked for in this order on each line.
ECC = re.compile(r"uncorrectable ECC error encountered|cudaErrorECCUncorrectable")
XID_79 = re.compile(r"NVRM: Xid \(PCI:[0-9A-Fa-f:.]+\): 79,|GPU has fallen off the bus")
# What a rank reports when a peer went away, not why the peer did. NCCL: ncclRemoteError's
# ncclGetErrorString text and name (NVIDIA/nccl nccl.h.in, src/init.cc at 5067397). PyTorch's
# NCCL watchdog ending a collective a peer never joined (ProcessGroupNCCL.cpp at cf1380d,
# WorkNCCL::checkTimeout). Gloo, as built into torch 2.13 (libtorch_cpu.so's strings;
# gloo/transport/tcp/pair.cc and unbound_buffer.cc): "Connection closed by peer", "connection
# reset by peer", "Timed out waiting Nms for recv/send operation" and the hint "This is typically
# caused by a remote worker ...". Horovod's shutdown after another rank's exception
# (horovod/common/common.h, SHUT_DOWN_ERROR).
PEER_SIGN = re.compile(
    r"remote process exited or there was a network error|ncclRemoteError|"
    r"Watchdog caught collective operation timeout|Connection closed by peer|"
    r"connection reset by peer|Timed out waiting \d+ms for (?:recv|send)|"
    r"typically caused by a remote worker|Horovod has been shut down",
    re.I,
)
# ncclSystemError and its text (nccl.h.in, src/init.cc at 5067397); NCCL's InfiniBand
# completion errors, "NCCL WARN NET/IB: Got completion from peer ..." (src/transport/net_ib/
# p2p.cc there; "NET/IB : Got completion" before 2.23).
NETWORK_SIGN = re.compile(r"ncclSystemError|unhandled system error|NCCL WARN NET/IB")
# Gloo's check that the bytes a peer sent fit the collective this rank called (torch 2.13's
# gloo/transport/tcp/pair.cc: "... Received data size doesn't match expected size. Is there a
# distributed collective mismatch in your code?"): the ranks called different collectives.
MISMATCH_SIGN = re.compile(r"Is there a distributed collective mismatch in your code")
# libstdc++'s std::terminate handler with no exception in flight, then abort() (training.teardown).
TEARDOWN_SIGN = re.compile(re.escape(TEARDOWN_ABORT))
SIGNS = (
    # cudaErrorECCUncorrectable's text (cudaGetErrorString), which PyTorch raises as "CUDA
    # error: <text>" (pytorch/pytorch c10/cuda/CUDAException.cpp at 0e4c6cd; NVIDIA's CUDA
    # runtime API reference).
    (HARDWARE, ECC, "a GPU had an uncorrectable ECC memory error"),
    # Xid 79, GPU_HAS_FALLEN_OFF_THE_BUS (NVIDIA's Xid catalog, docs.nvidia.com/deploy/
    # xid-errors, read 2026-11-26), as the driver logs it ("NVRM: Xid (PCI:0000:2b:00): 79,
    # ...", NVIDIA/open-gpu-kernel-modules#1151, 2026-05-18).
    (HARDWARE, XID_79, "a GPU fell off the bus (Xid 79)"),
    (USER, MISMATCH_SIGN, "the ranks called different collectives"),
    (PEER, PEER_SIGN, "a rank lost its peers"),
    (NETWORK, NETWORK_SIGN, "an NCCL network or system error"),
    (TEARDOWN, TEARDOWN_SIGN, "a rank aborted as its process ended (std::terminate)"),
)
_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")  # torch's "[rank1]: " on a traceback
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s(?P<text>.*))?$")
_ERROR_LINE = re.compile(r"^(?:[^:]*: )?error: \S")  # argparse and training.errors
# libstdc++'s report of an uncaught C++ exception, after "terminate called after throwing an
# instance of 'T'" (__gnu_cxx::__verbose_terminate_handler): its message.
_WHAT = re.compile(r"^\s*what\(\):\s+\S")
MAX_LINE = 300  # characters of a sign's line kept


@dataclass(frozen=True)
class Record:
    rank: int | None
    node: str
    round: int  # torchrun's restart round (TORCHELASTIC_RESTART_COUNT); 0 under MPI
    time: float  # seconds since the epoch: the first sign, else when the command ended
    exit: int  # the guard's exit code (128 + N for signal N)
    signal: str | None  # the signal that ended the command, if one did
    kind: str
    line: str  # the first line that matters (the exception's last line, the sign, or why)
    post_mortem: list[str] | None = None  # the node's GPU problems after the failure; None: not run

    def where(self) -> str:
        who = "a rank" if self.rank is None else f"rank {self.rank}"
        return f"{who} on {self.node}"

    def text(self) -> str:
        return LINE + json.dumps(asdict(self), sort_keys=True)


def kind_of(line: str) -> str | None:
    """The kind of sign a line carries, or None."""
    for kind, pattern, _words in SIGNS:
        if pattern.search(line):
            return kind
    return None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Signs:
    """Reads a rank's output line by line (`feed`, with the time it was seen) and keeps the
    first sign: a known sign's line, or a Python exception's last line (its type and message)
    or an `error:` line, which are the script's own unless a known sign says otherwise. A
    hardware sign seen later still wins: it explains what came before it."""

    def __init__(self):
        self.first: tuple[str, str, float] | None = None  # kind, line, time
        self.last = ""  # the last line that was not blank
        self.in_traceback: set[str] = set()  # the streams in a traceback now

    def feed(self, raw: str, now: float, stream: str = "stderr") -> None:
        """One line of the output `stream` (stdout and stderr interleave: a traceback is read
        on its own stream)."""
        line = _PREFIX.sub("", raw.rstrip("\n"))
        if line.strip():
            self.last = line.strip()[:MAX_LINE]
        kind = kind_of(line)
        if kind is None and stream in self.in_traceback and line and not line[0].isspace():
            self.in_traceback.discard(stream)
            if _EXCEPTION.match(line):
                kind = USER
        elif kind is None and (_ERROR_LINE.match(line) or _WHAT.match(line)):
            kind = USER
        if line.startswith(_TRACEBACK):
            self.in_traceback.add(stream)
        if kind is None:
            return
        if self.first is None or (kind == HARDWARE and self.first[0] != HARDWARE):
            self.first = (kind, line.strip()[:MAX_LINE], now)


_FIELDS = {"rank", "node", "round", "time", "exit", "signal", "kind", "line"}
_OPTIONAL = {"post_mortem"}


def parse(text: str) -> list[Record]:
    """Every exit record printed in a job's logs (a line may start with another process's
    unfinished output, so the record is looked for anywhere in it)."""
    found = []
    for line in text.splitlines():
        at = line.find(LINE)
        if at < 0:
            continue
        try:
            fields = json.loads(line[at + len(LINE) :])
        except json.JSONDecodeError:
            continue  # not a record (a line quoting the prefix)
        if isinstance(fields, dict) and fields.keys() >= _FIELDS:
            found.append(
                Record(**{name: fields[name] for name in _FIELDS | _OPTIONAL & fields.keys()})
            )
    return found
