"""Reads PyTorch flight-recorder dumps (one file per rank) and names the ranks that never
reached the collective the others waited in, with their hosts. Stdlib only: `azdl train` reads
them in the operator environment, a job's nodes after torchrun ends.

    python -m training.flight_recorder DUMPS_PREFIX --world-size N [--ranks-dir DIR] [--wait S]

A dump is the pickle PyTorch writes (torch/csrc/distributed/c10d/FlightRecorder.cpp, `dump`):
`pg_status` holds, per process group id, `last_enqueued_collective` (the sequence number of the
last collective this rank entered), and `entries` the recent collectives, each with its
`pg_id`, `collective_seq_id` and `profiling_name` ("gloo:all_reduce", "nccl:all_reduce").
"""

import argparse
import pickle
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from training.guard import host_of

# The environment of the torchrun path's safeguards, set by azdl (azdl.jobs.safeguards) and
# read by PyTorch and training.torch.distributed.
COLLECTIVE_TIMEOUT_ENV = "AZDL_COLLECTIVE_TIMEOUT_S"  # seconds; init_process_group's timeout
# Flight-recorder entries kept (torch 2.13's distributed_c10d.py reads TORCH_FR_BUFFER_SIZE,
# else the older TORCH_NCCL_TRACE_BUFFER_SIZE); the dump file of rank R is `<prefix>R`
# (FlightRecorder.cpp, DebugInfoWriter: TORCH_FR_DUMP_TEMP_FILE, formerly
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE).
BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"
DUMP_PREFIX_ENV = "TORCH_FR_DUMP_TEMP_FILE"
DUMP_FILE_PREFIX = "rank_"  # the files' names in the dump folder: rank_0, rank_1, …


class _PlainData(pickle.Unpickler):
    """A dump holds dicts, lists, strings and numbers only: no class is ever loaded."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a flight-recorder dump names {module}.{name}")


def load(path: Path) -> dict:
    with path.open("rb") as f:
        return _PlainData(f).load()


@dataclass(frozen=True)
class Laggard:
    rank: int
    group: str  # the process group id
    waited_for: int  # the collective the other ranks entered
    what: str  # its profiling name
    last: int | None  # the last collective this rank entered; None: no dump
    waiting: tuple[int, ...]  # the ranks that entered it


def laggards(dumps: dict[int, dict], world_size: int) -> list[Laggard]:
    """The ranks behind the furthest one in some process group, and those with no dump."""
    found = []
    groups = sorted({g for d in dumps.values() for g in d.get("pg_status", {})})
    for group in groups:
        last = {
            rank: int(d["pg_status"][group]["last_enqueued_collective"])
            for rank, d in dumps.items()
            if group in d.get("pg_status", {})
        }
        furthest = max(last.values())
        waiting = tuple(sorted(r for r, seq in last.items() if seq == furthest))
        what = _name_of(dumps[waiting[0]], group, furthest)
        for rank in range(world_size):
            if rank not in dumps or last.get(rank, furthest) < furthest:
                found.append(Laggard(rank, group, furthest, what, last.get(rank), waiting))
    return found


def _name_of(dump: dict, group: str, seq: int) -> str:
    for entry in dump.get("entries", []):
        if str(entry.get("pg_id")) == group and entry.get("collective_seq_id") == seq:
            return str(entry.get("profiling_name", "?"))
    return "not in the ring buffer"


def read(prefix: str, world_size: int) -> dict[int, dict]:
    """The dumps `<prefix><rank>` that exist."""
    return {
        rank: load(Path(f"{prefix}{rank}"))
        for rank in range(world_size)
        if Path(f"{prefix}{rank}").is_file()
    }


def report(prefix: str, world_size: int, ranks_dir: Path | None) -> list[str]:
    """One line per rank that kept the others waiting, or why none can be named."""
    dumps = read(prefix, world_size)
    if not dumps:
        return [f"no flight-recorder dump at {prefix}<rank>: no rank could be named"]

    def where(rank: int) -> str:
        return f"rank {rank}" + (f" on {host_of(ranks_dir, rank)}" if ranks_dir else "")

    lines = []
    for lag in laggards(dumps, world_size):
        others = ", ".join(map(str, lag.waiting))
        collective = f"collective {lag.waited_for} ({lag.what}) of process group {lag.group}"
        if lag.last is None:
            lines.append(
                f"{where(lag.rank)} left no flight-recorder dump (its process was gone or "
                f"stuck); rank(s) {others} waited in {collective}"
            )
        else:
            lines.append(
                f"{where(lag.rank)} never reached {collective}: its last was collective "
                f"{lag.last}; rank(s) {others} waited in it"
            )
    if not lines:
        lines.append(
            f"every rank of {len(dumps)} reached its last collective: the hang is inside a "
            "collective (the network or the collective library), not a rank that stayed away"
        )
    return lines


def wait_for_dumps(prefix: str, world_size: int, seconds: float) -> None:
    """Until every rank's dump exists, or `seconds` have passed: on a job, other nodes' dumps
    reach the shared logs folder a little later than this node's."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(Path(f"{prefix}{rank}").is_file() for rank in range(world_size)):
            return
        time.sleep(1.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.flight_recorder", description=__doc__)
    p.add_argument("prefix", help="the dumps' path prefix (TORCH_FR_DUMP_TEMP_FILE)")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--ranks-dir", type=Path, help="training.guard's rank → host records")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for every dump")
    args = p.parse_args(argv)
    wait_for_dumps(args.prefix, args.world_size, args.wait)
    for line in report(args.prefix, args.world_size, args.ranks_dir):
        print(f"azdl: {line}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
