"""A stop that every restart would repeat (the guard's InfiniBand stop, a failed health gate),
told to every node of a torchrun job so that no torchrun restarts its workers in vain and the
job ends at once. Stdlib only, torch imported where it is needed.

Two ways, for the two moments a stop can come:

- during training, the guard closes torchrun's rendezvous (`close_rendezvous`): a closed
  rendezvous takes no next round, so each node's torchrun ends at its next rendezvous instead
  of restarting (torch 2.13 elastic/rendezvous/dynamic_rendezvous.py: `set_closed`, and
  `_RendezvousJoinOp` raising RendezvousClosedError; agent/server/api.py `_invoke_run` restarts
  through that rendezvous);
- before it (a node's gate failed, so its torchrun never starts and the others would wait out the
  rendezvous's timeout), the node writes a stop into the job's logs folder, which every node
  sees, and each node's torchrun runs under `run`, which ends it when a stop appears.

    python -m training.job_stop write DIR --exit CODE --why TEXT
    python -m training.job_stop run DIR -- torchrun ...
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# Set on each node before its torchrun (azdl.launchers): the rendezvous's endpoint, which
# torchrun does not pass on to its workers, and the job's folder of stops.
RENDEZVOUS_ENV = "AZDL_RDZV_ENDPOINT"
STOP_DIR_ENV = "AZDL_STOP_DIR"
POLL_S = 2.0  # how often `run` looks for a stop
PREFIX = "azdl: stop:"


def write(folder: Path, code: int, why: str) -> None:
    """This node's stop, for every node's `run` to see."""
    folder.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    stop = {"node": host, "exit": code, "why": why, "time": round(time.time(), 3)}
    tmp = folder / f".{host}.json.tmp"
    tmp.write_text(json.dumps(stop))
    tmp.replace(folder / f"{host}.json")
    print(f"{PREFIX} {host}: {why}; every node's torchrun ends (no restart would pass)",
          file=sys.stderr, flush=True)  # fmt: skip


def first_stop(folder: Path) -> dict | None:
    """The earliest stop any node wrote, or None."""
    stops = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return min(stops, key=lambda s: s["time"]) if stops else None


def close_rendezvous(why: str) -> bool:
    """Closes the job's torchrun rendezvous (a worker of a job's torchrun: TORCHELASTIC_RUN_ID
    and RENDEZVOUS_ENV set); False when this process is not one."""
    endpoint, run_id = os.environ.get(RENDEZVOUS_ENV), os.environ.get("TORCHELASTIC_RUN_ID")
    if not endpoint or not run_id:
        return False
    from torch.distributed.elastic.rendezvous import RendezvousError, RendezvousParameters
    from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

    # A client of node 0's store, as torchrun's own agents are (c10d backend, is_host false).
    params = RendezvousParameters(backend="c10d", endpoint=endpoint, run_id=run_id,
                                  min_nodes=1, max_nodes=1, is_host=False)  # fmt: skip
    try:
        get_rendezvous_handler(params).set_closed()
    except RendezvousError as exc:  # node 0's store gone: its torchrun has ended already
        print(f"{PREFIX} torchrun's rendezvous {run_id} not closed: {exc}", file=sys.stderr,
              flush=True)  # fmt: skip
        return False
    print(f"{PREFIX} closed torchrun's rendezvous {run_id}: {why}; no node restarts its workers",
          file=sys.stderr, flush=True)  # fmt: skip
    return True


def run(folder: Path, command: list[str]) -> int:
    """`command` (torchrun), ended with SIGTERM when any node has written a stop; the
    signals that end this process go on to it."""
    child = subprocess.Popen(command)

    def forward(signum, _frame):
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    while True:
        try:
            return child.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
        stop = first_stop(folder)
        if stop is not None:
            print(f"{PREFIX} {stop['node']} stopped the job: {stop['why']}; ending this node's "
                  "torchrun", file=sys.stderr, flush=True)  # fmt: skip
            child.terminate()
            child.wait()
            return int(stop["exit"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.job_stop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    actions = p.add_subparsers(dest="action", required=True)
    w = actions.add_parser("write", help="write this node's stop")
    w.add_argument("folder", type=Path)
    w.add_argument("--exit", type=int, required=True, help="the exit code of what stopped")
    w.add_argument("--why", required=True)
    r = actions.add_parser("run", help="run a command until a node writes a stop")
    r.add_argument("folder", type=Path)
    r.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.action == "write":
        write(args.folder, args.exit, args.why)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("run: no command: give it after --")
    return run(args.folder, command)


if __name__ == "__main__":
    sys.exit(main())
