"""Runs one rank's training command and watches its output (stdlib only): records the rank's
host, names the ranks Horovod's stall inspector reports missing, and with `--check-infiniband`
stops the rank when NCCL fell back to TCP or runs without GPUDirect RDMA across nodes.

    python -m training.guard --ranks-dir DIR [--check-infiniband --nodes N] -- python train.py ...

Exit code: the command's (128 + signal number for a signal), or 3 when the guard stopped it.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from training.nccl_check import NcclCheck

IB_CHECK_FAILED = 3
# Open MPI, Intel MPI / MPICH, horovodrun; RANK: torchrun's (torch/distributed/run.py,
# "Environment Variables").
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK", "RANK")
_MISSING_RANK = re.compile(r"^\s*(\d+)(!?): \[(.*)\]\s*$")
_STALL_SHUTDOWN = "is stalled for longer than"


def this_rank() -> int | None:
    for name in RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def record_host(ranks_dir: Path, rank: int, host: str) -> None:
    ranks_dir.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "host": host, "pid": os.getpid()}
    tmp = ranks_dir / f".rank-{rank}.json.tmp"
    tmp.write_text(json.dumps(record))
    tmp.replace(ranks_dir / f"rank-{rank}.json")


def host_of(ranks_dir: Path, rank: int) -> str:
    path = ranks_dir / f"rank-{rank}.json"
    if not path.is_file():
        return f"host unknown: no {path}"
    return json.loads(path.read_text())["host"]


class Watch:
    """What the guard reads in the command's output; `relay` is called once per line."""

    def __init__(self, args, rank: int | None, host: str):
        self.args, self.rank, self.host = args, rank, host
        self.check = NcclCheck(multi_node=args.nodes > 1) if args.check_infiniband else None
        self.stalled: dict[int, str] = {}  # rank → tensors it has not submitted
        self.shutdown = False
        self.failed_check = None
        self.lock = threading.Lock()

    def line(self, text: str) -> bool:
        """Looks at one line; returns whether it goes on to the output."""
        with self.lock:
            if match := _MISSING_RANK.match(text):
                self.stalled[int(match.group(1))] = match.group(3)
                if match.group(2):
                    self.shutdown = True
                host = host_of(self.args.ranks_dir, int(match.group(1)))
                say(f"stall: rank {match.group(1)} on {host} has not submitted {match.group(3)}")
            elif _STALL_SHUTDOWN in text:
                self.shutdown = True
            if self.check is None or "NCCL" not in text:
                return True
            if self.check.verdict is None:
                verdict = self.check.feed(text)
                if verdict is not None:
                    self.report(verdict)
                return True
            return "NCCL INFO" not in text or self.args.nccl_debug in ("INFO", "TRACE")

    def report(self, verdict) -> None:
        where = f"rank {self.rank} on {self.host}"
        if verdict.ok:
            say(f"InfiniBand check passed on {where}: {verdict.message}")
        elif self.args.nodes > 1:
            say(f"InfiniBand check FAILED on {where}: {verdict.message}; stopping the job")
            self.failed_check = verdict
        else:
            say(f"warning: InfiniBand check on {where}: {verdict.message} (single node: goes on)")

    def summary(self) -> None:
        if self.stalled:
            ranks = ", ".join(
                f"{r} ({host_of(self.args.ranks_dir, r)})" for r in sorted(self.stalled)
            )
            what = "Horovod shut the job down" if self.shutdown else "the job ended"
            say(f"{what} on a stall: rank(s) {ranks} stopped calling collectives")
        if self.check is not None and self.check.verdict is None:
            verdict = self.check.finish()
            say(
                f"InfiniBand not verified on rank {self.rank}: the command ended before NCCL "
                f"completed a communicator ({verdict.message})"
            )


def say(message: str) -> None:
    print(f"azdl: {message}", file=sys.stderr, flush=True)


def relay(stream, out, watch: Watch, child: subprocess.Popen) -> None:
    for text in iter(stream.readline, ""):
        if watch.line(text.rstrip("\n")):
            out.write(text)
            out.flush()
        if watch.failed_check is not None and child.poll() is None:
            child.terminate()


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m training.guard", description=__doc__)
    p.add_argument("--ranks-dir", type=Path, required=True, help="folder of rank → host records")
    p.add_argument("--check-infiniband", action="store_true", help="verify NCCL's transport")
    p.add_argument("--nodes", type=int, default=1, help="nodes in the job (GDR needed if > 1)")
    p.add_argument("--nccl-debug", default="WARN", help="the user's NCCL_DEBUG, after the check")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the rank's command")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("no command: give it after --")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    rank, host = this_rank(), socket.gethostname()
    if rank is not None:
        record_host(args.ranks_dir, rank, host)
        say(f"rank {rank} on {host} (pid {os.getpid()})")
    env = {"PYTHONUNBUFFERED": "1"} | dict(os.environ)  # a value already set wins
    child = subprocess.Popen(
        args.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        errors="replace", env=env,
    )  # fmt: skip
    # mpirun ends a job by signalling its processes: hand the signal on to the command.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    watch = Watch(args, rank, host)
    threads = [
        threading.Thread(target=relay, args=(child.stdout, sys.stdout, watch, child)),
        threading.Thread(target=relay, args=(child.stderr, sys.stderr, watch, child)),
    ]
    for thread in threads:
        thread.start()
    code = child.wait()
    for thread in threads:
        thread.join()
    watch.summary()
    if watch.failed_check is not None:
        return IB_CHECK_FAILED
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
