"""Reads PyTorch flight-recorder dumps (one file per rank, per torchrun restart round) and says
what they show: ranks that called different collectives at one sequence number (a desync), or
the ranks that never reached the collective the others waited in, with their hosts; a rank
whose dump is not there is "not seen yet", never the culprit. Stdlib only: `azdl train` reads
them in the operator environment, a job's nodes after torchrun ends.

    python -m training.flight_recorder DUMPS_PREFIX --world-size N [--ranks-dir DIR] [--wait S]

A dump is the pickle PyTorch writes (torch/csrc/distributed/c10d/FlightRecorder.cpp, `dump`):
`pg_status` holds, per process group id, `last_enqueued_collective` (the sequence number of the
last collective this rank entered), and `entries` the recent collectives, each with its
`pg_id`, `collective_seq_id` and `profiling_name` ("gloo:all_reduce", "nccl:all_reduce").
"""

import argparse
import os
import pickle
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from training import exits, job_stop
from training.ranks import exit_records, host_of

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
ROUND_FOLDER = "round-"  # each torchrun restart round's dumps: round-0/rank_0, round-1/rank_0, …


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
    last: int  # the last collective this rank entered
    waiting: tuple[int, ...]  # the ranks that entered it


def laggards(dumps: dict[int, dict]) -> list[Laggard]:
    """The ranks behind the furthest one in some process group, among those with a dump."""
    found = []
    for group in groups(dumps):
        last = {
            rank: int(d["pg_status"][group]["last_enqueued_collective"])
            for rank, d in dumps.items()
            if group in d.get("pg_status", {})
        }
        furthest = max(last.values())
        waiting = tuple(sorted(r for r, seq in last.items() if seq == furthest))
        what = _name_of(dumps[waiting[0]], group, furthest)
        for rank in sorted(last):
            if last[rank] < furthest:
                found.append(Laggard(rank, group, furthest, what, last[rank], waiting))
    return found


def groups(dumps: dict[int, dict]) -> list[str]:
    return sorted({g for d in dumps.values() for g in d.get("pg_status", {})})


def _name_of(dump: dict, group: str, seq: int) -> str:
    entry = _entry(dump, group, seq)
    return str(entry.get("profiling_name", "?")) if entry else "not in the ring buffer"


def _entry(dump: dict, group: str, seq: int) -> dict | None:
    for entry in dump.get("entries", []):
        if str(entry.get("pg_id")) == group and entry.get("collective_seq_id") == seq:
            return entry
    return None


def signature(entry: dict) -> tuple:
    """What PyTorch's own analyser compares between ranks at one sequence number
    (torch/distributed/flight_recorder/components/types.py, torch 2.13, `Op.match`): the
    collective's type (the profiling name without its backend), input and output sizes, input
    and output dtypes."""
    op = str(entry.get("profiling_name", "?")).split(":", 1)[-1]
    return (op, entry.get("input_sizes"), entry.get("output_sizes"),
            entry.get("input_dtypes"), entry.get("output_dtypes"))  # fmt: skip


def describe(entry: dict) -> str:
    op, sizes_in, sizes_out, dtypes_in, dtypes_out = signature(entry)
    return (f"{op} (input sizes {sizes_in}, dtypes {dtypes_in}; output sizes {sizes_out}, "
            f"dtypes {dtypes_out})")  # fmt: skip


@dataclass(frozen=True)
class Desync:
    group: str
    seq: int  # the first collective whose ranks disagree
    calls: dict[int, dict]  # rank -> its entry


def desyncs(dumps: dict[int, dict]) -> list[Desync]:
    """Per process group, the first sequence number at which the ranks that recorded it called
    different collectives (type, sizes or dtypes)."""
    found = []
    for group in groups(dumps):
        seqs = sorted({
            e["collective_seq_id"] for d in dumps.values() for e in d.get("entries", [])
            if str(e.get("pg_id")) == group and e.get("collective_seq_id") is not None
        })  # fmt: skip
        for seq in seqs:
            calls = {r: e for r, d in dumps.items() if (e := _entry(d, group, seq)) is not None}
            if len({repr(signature(e)) for e in calls.values()}) > 1:
                found.append(Desync(group, seq, calls))
                break
    return found


def round_prefix(prefix: str, restart_round: int) -> str:
    """The dumps' prefix of one torchrun restart round: `<folder>/round-<N>/<name>`, so that a
    round's dumps never overwrite another's (every round's rank R would write `<prefix>R`)."""
    path = Path(prefix)
    return str(path.parent / f"{ROUND_FOLDER}{restart_round}" / path.name)


def latest_round(prefix: str) -> tuple[str, int | None]:
    """The prefix of the last round that wrote dumps (and its number), else `prefix` itself."""
    folder = Path(prefix).parent
    rounds = [int(p.name.removeprefix(ROUND_FOLDER)) for p in folder.glob(f"{ROUND_FOLDER}*")
              if p.name.removeprefix(ROUND_FOLDER).isdigit()]  # fmt: skip
    if not rounds:
        return prefix, None
    return round_prefix(prefix, max(rounds)), max(rounds)


def read(prefix: str, world_size: int) -> dict[int, dict]:
    """The dumps `<prefix><rank>` that exist."""
    return {
        rank: load(Path(f"{prefix}{rank}"))
        for rank in range(world_size)
        if Path(f"{prefix}{rank}").is_file()
    }


def report(prefix: str, world_size: int, ranks_dir: Path | None) -> list[str]:
    """Lines on the last restart round's dumps: a desync (ranks that called different
    collectives at one sequence number), else the ranks that kept the others waiting, and the
    ranks whose dump has not been seen (never blamed: their node may not have written it yet,
    or the job's folder may not show it yet)."""
    prefix, restart_round = latest_round(prefix)
    dumps = read(prefix, world_size)
    if not dumps:
        return [f"no flight-recorder dump at {prefix}<rank>: no rank could be named"]

    def where(rank: int) -> str:
        return f"rank {rank}" + (f" on {host_of(ranks_dir, rank)}" if ranks_dir else "")

    lines = []
    for desync in desyncs(dumps):
        calls = "; ".join(
            f"{where(r)} called {describe(e)}" for r, e in sorted(desync.calls.items())
        )
        lines.append(f"desync at collective {desync.seq} of process group {desync.group}: {calls}")
    if not lines:
        for lag in laggards(dumps):
            lines.append(
                f"{where(lag.rank)} never reached collective {lag.waited_for} ({lag.what}) of "
                f"process group {lag.group}: its last was collective {lag.last}; rank(s) "
                f"{', '.join(map(str, lag.waiting))} waited in it"
            )
    if not lines:
        lines.append(
            f"every rank of {len(dumps)} reached its last collective: the hang is inside a "
            "collective (the network or the collective library), not a rank that stayed away"
        )
    if unseen := [r for r in range(world_size) if r not in dumps]:
        lines.append(
            f"not seen yet: no dump of rank(s) {', '.join(map(str, unseen))} (not judged: its "
            "process may have gone before dumping, or the job's folder does not show it yet)"
        )
    if restart_round:
        lines = [f"(restart round {restart_round}) {line}" for line in lines]
    return lines


def cause_on_record(ranks_dir: Path | None) -> exits.Record | None:
    """The first rank's own failure among the exit records the guards wrote (a rank that
    raised, was killed, or stopped), or None."""
    if ranks_dir is None:
        return None
    records = exit_records(ranks_dir)
    latest = max((r.round for r in records), default=0)
    causes = [r for r in records if r.round == latest
              and r.kind not in (*exits.CONSEQUENCES, exits.FINISHED)]  # fmt: skip
    return min(causes, key=lambda r: r.time) if causes else None


def known_cause(ranks_dir: Path | None) -> str | None:
    """Why the run failed, when that is known without the dumps: a rank's own failure on record,
    or a node's stop (training.job_stop, in the folder the job names); None while neither is."""
    if (record := cause_on_record(ranks_dir)) is not None:
        return f"first failure on record: {record.where()}: {record.line}"
    folder = os.environ.get(job_stop.STOP_DIR_ENV)
    if folder and (stop := job_stop.first_stop(Path(folder))) is not None:
        return f"{stop['node']} stopped the job: {stop['why']}"
    return None


def wait_for_dumps(prefix: str, world_size: int, seconds: float, ranks_dir: Path | None) -> None:
    """Until every rank's dump exists, the cause is known without them (`known_cause`), or
    `seconds` have passed: on a job, other nodes' dumps reach the shared logs folder a little
    later than this node's."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and known_cause(ranks_dir) is None:
        prefix_now, _ = latest_round(prefix)
        if all(Path(f"{prefix_now}{rank}").is_file() for rank in range(world_size)):
            return
        time.sleep(1.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.flight_recorder", description=__doc__)
    p.add_argument("prefix", help="the dumps' path prefix (TORCH_FR_DUMP_TEMP_FILE)")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--ranks-dir", type=Path, help="training.guard's rank → host records")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for every dump")
    args = p.parse_args(argv)
    wait_for_dumps(args.prefix, args.world_size, args.wait, args.ranks_dir)
    if (cause := known_cause(args.ranks_dir)) is not None:
        print(f"azdl: {cause}", file=sys.stderr, flush=True)
    for line in report(args.prefix, args.world_size, args.ranks_dir):
        print(f"azdl: {line}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
