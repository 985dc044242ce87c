"""Node-side copy step of the `copy` storage mode (stdlib only).

    python -m training.copy_shards --source /mnt/data --dest /mnt/nvme/data

Run once per worker under the job's MPI launch, before training. Local rank 0 of each node
copies the shards that this node's ranks will read (by global rank, `training.shards`) from
the mounted container or share to local disk, after checking there is room; the node's other
ranks wait for it. Training then reads `--dest` unchanged: every other shard appears there as
a symbolic link to the mount, so `--dest` lists the whole dataset, each worker's global-rank
share of it is on local disk, and the links (which no rank on this node reads) cost nothing.

The node's global ranks are taken as the contiguous block `rank - local_rank …
+ local_size - 1`, which is how mpirun (by slot) and horovodrun place ranks.
"""

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from training.dataprep.manifest import MANIFEST_NAME
from training.dataprep.options import Option, add_options
from training.errors import TrainingError
from training.shards import SPLITS, list_shards, shards_for_rank

DONE_MARKER = ".azdl-copy-done.json"
FAILED_MARKER = ".azdl-copy-failed"
FREE_SPACE_MARGIN = 1.02  # leave 2% beyond the shards' own size
LOG_EVERY_S = 5.0

COPY_OPTIONS: list[Option] = [
    (
        "--source",
        dict(
            type=Path,
            required=True,
            help="shard folder as mounted on the node (blob mount or NFS share)",
        ),
    ),
    ("--dest", dict(type=Path, required=True, help="node-local folder to copy to (local NVMe)")),
    (
        "--splits",
        dict(
            default="train,validation",
            help="comma-separated splits to copy; a split "
            "without shards in --source is left out (default train,validation)",
        ),
    ),
    (
        "--timeout",
        dict(
            type=float,
            default=7200.0,
            help="seconds the other local ranks wait for local rank 0 (default 7200)",
        ),
    ),
]

# (rank, size, local rank, local size) variables of the launchers we meet: Open MPI (Azure ML's
# MPI jobs), horovodrun, Intel MPI / MPICH.
_LAUNCH_ENV = [
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
]


@dataclass(frozen=True)
class Launch:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def node_ranks(self) -> range:
        first = self.rank - self.local_rank
        return range(first, first + self.local_size)


def launch_from_env(env: dict[str, str]) -> Launch:
    """The MPI launch's rank and size (a single process when not launched by MPI)."""
    for names in _LAUNCH_ENV:
        if names[0] not in env:
            continue
        try:
            launch = Launch(*(int(env[name]) for name in names))
        except (KeyError, ValueError) as exc:
            raise TrainingError(
                f"incomplete or non-integer launch variables {', '.join(names)}: {exc}"
            ) from exc
        nodes = launch.node_ranks
        in_node = 0 <= launch.local_rank < launch.local_size
        if not (in_node and 0 <= nodes.start < nodes.stop <= launch.size):
            raise TrainingError(f"inconsistent launch variables {', '.join(names)}: {launch}")
        return launch
    return Launch()


def plan_shards(source: Path, splits: list[str], launch: Launch) -> tuple[list[Path], list[Path]]:
    """(the shards this node's ranks read, all other shards), each sorted by name."""
    mine: set[str] = set()
    everything: set[str] = set()
    for split in splits:
        try:
            shards = list_shards(source, split)
        except TrainingError:
            if not source.is_dir():
                raise
            continue  # a split this dataset does not have
        everything.update(shards)
        for rank in launch.node_ranks:
            mine.update(shards_for_rank(shards, rank, launch.size))
    if not everything:
        raise TrainingError(f"no shards of {', '.join(splits)} in {source}")
    return sorted(Path(f) for f in mine), sorted(Path(f) for f in everything - mine)


def link_others(others: list[Path], dest: Path) -> None:
    """Symbolic links in `dest` to the shards other nodes read, so `dest` lists them all."""
    for shard in others:
        link = dest / shard.name
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            continue  # a complete local copy from an earlier run serves as well
        link.symlink_to(shard.absolute())


def copy_files(files: list[Path], dest: Path, log=print) -> int:
    """Copy `files` into `dest` (skipping complete copies); return the bytes copied."""
    dest.mkdir(parents=True, exist_ok=True)
    sizes = {f: f.stat().st_size for f in files}
    todo = [f for f in files if not _complete(dest / f.name, sizes[f])]
    needed = sum(sizes[f] for f in todo)
    free = shutil.disk_usage(dest).free
    if needed * FREE_SPACE_MARGIN > free:
        raise TrainingError(
            f"not enough free space in {dest}: {len(todo)} shard(s) need {needed / 1e9:.2f} GB "
            f"(+2% margin), {free / 1e9:.2f} GB free; use a larger local disk or the mount/nfs "
            "storage modes"
        )
    log(
        f"copying {len(todo)} shard(s), {needed / 1e9:.2f} GB, to {dest} "
        f"({len(files) - len(todo)} already there)"
    )
    start = last_log = time.monotonic()
    done = 0
    for i, f in enumerate(todo, 1):
        partial = dest / f".{f.name}.partial"
        shutil.copyfile(f, partial)
        partial.replace(dest / f.name)  # a shard under its own name is always complete
        done += sizes[f]
        now = time.monotonic()
        if now - last_log >= LOG_EVERY_S or i == len(todo):
            rate = done / 1e6 / max(now - start, 1e-9)
            log(
                f"  {i}/{len(todo)} shards, {done / 1e9:.2f}/{needed / 1e9:.2f} GB, {rate:.0f} MB/s"
            )
            last_log = now
    return done


def _complete(path: Path, size: int) -> bool:
    return path.is_file() and not path.is_symlink() and path.stat().st_size == size


def _expected(files: list[Path], source: Path) -> dict:
    return {"source": str(source), "files": {f.name: f.stat().st_size for f in files}}


def run_node_copy(
    source: Path, dest: Path, splits: list[str], launch: Launch, timeout: float, log=print
) -> None:
    """Local rank 0 copies and marks the folder done; the other local ranks wait for the mark."""
    files, others = plan_shards(source, splits, launch)
    expected = _expected(files, source)
    done_marker, failed_marker = dest / DONE_MARKER, dest / FAILED_MARKER
    if launch.local_rank == 0:
        dest.mkdir(parents=True, exist_ok=True)
        done_marker.unlink(missing_ok=True)
        failed_marker.unlink(missing_ok=True)
        try:
            copy_files(files, dest, log)
            link_others(others, dest)
            if (source / MANIFEST_NAME).is_file():  # training counts examples from it
                shutil.copyfile(source / MANIFEST_NAME, dest / MANIFEST_NAME)
        except (OSError, TrainingError) as exc:
            failed_marker.write_text(str(exc))
            raise
        done_marker.write_text(json.dumps(expected))
        log(
            f"node ranks {launch.node_ranks.start}-{launch.node_ranks.stop - 1}: "
            f"{len(files)} shard(s) ready in {dest}"
        )
        return
    log(f"local rank {launch.local_rank} waiting for local rank 0 to copy {len(files)} shard(s)")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if failed_marker.is_file():
            raise TrainingError(f"local rank 0 failed to copy: {failed_marker.read_text()}")
        # A marker from an earlier run counts only if it lists the same files, all complete.
        if _marker(done_marker) == expected and all(
            _complete(dest / name, size) for name, size in expected["files"].items()
        ):
            return
        time.sleep(0.5)
    raise TrainingError(f"local rank 0 did not finish copying to {dest} within {timeout:.0f} s")


def _marker(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # not there yet, or being written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="azdl data copy",
        description="Copy the shards this node's ranks read from a mounted folder to local "
        "disk (local rank 0 copies, the others wait). Run once per worker under the MPI launch.",
    )
    add_options(p, COPY_OPTIONS)
    args = p.parse_args(argv)
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    unknown = [s for s in splits if s not in SPLITS]
    if unknown or not splits:
        p.error(f"unknown split(s) {unknown or splits}; allowed: {', '.join(SPLITS)}")
    try:
        launch = launch_from_env(dict(os.environ))
        prefix = f"[copy_shards rank {launch.rank}]"
        log = lambda line: print(f"{prefix} {line}", flush=True)  # noqa: E731
        run_node_copy(args.source, args.dest, splits, launch, args.timeout, log)
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
