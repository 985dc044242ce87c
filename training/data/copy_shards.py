"""Node-side copy steps (stdlib only).

    python -m training.data.copy_shards --source /mnt/data --dest /mnt/nvme/data
    python -m training.data.copy_shards --all --source /mnt/data --dest /mnt/azdl-nfs/imagenet

Without `--all` (the `copy` storage mode) local rank 0 of each node copies the shards its
node's ranks read to local disk; with `--all` one process fills the NFS share. How both work:
docs/architecture.md ("Copying shards").
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from training.data.prepare.manifest import (
    MANIFEST_NAME,
    SHARD_FILE,
    ManifestError,
    file_md5,
    load_manifest,
)
from training.data.prepare.options import Option, add_options
from training.data.shards import SPLITS, list_shards, shards_for_rank
from training.errors import TrainingError

DONE_MARKER = ".azdl-copy-done.json"
FAILED_MARKER = ".azdl-copy-failed"
FREE_SPACE_MARGIN = 1.02  # leave 2% beyond the shards' own size
LOG_EVERY_S = 5.0
# Without a job identity, a marker counts only if written at most this long before the waiting
# rank started (the node's ranks start within seconds of each other; jobs, minutes apart).
UNIDENTIFIED_JOB_SLACK_S = 60.0
_CHUNK = 8 * 1024 * 1024
_TOTAL = re.compile(r"-of-(\d{5})$")

COPY_OPTIONS: list[Option] = [
    (
        "--source",
        dict(
            type=Path,
            required=True,
            help="shard folder as mounted on the node (blob mount or NFS share)",
        ),
    ),
    (
        "--dest",
        dict(
            type=Path,
            required=True,
            help="folder to copy to: local NVMe, or with --all the NFS share's folder",
        ),
    ),
    (
        "--all",
        dict(
            action="store_true",
            help="copy every shard of the manifest and the manifest itself, verified by MD5, "
            "in one process (fills the NFS share from the blob mount); without it, copy "
            "only this node's shards under the MPI launch",
        ),
    ),
    (
        "--splits",
        dict(
            default="train,validation",
            help="comma-separated splits to copy; a split "
            "without shards in --source is left out (default train,validation; not with --all)",
        ),
    ),
    (
        "--job-id",
        dict(
            help="identity of this job, shared by all its ranks, that the node's copy markers "
            "carry (default: $AZUREML_RUN_ID, else Open MPI's job id)",
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
# MPI jobs), horovodrun, Intel MPI / MPICH, torchrun (torch/distributed/run.py, "Environment
# Variables"; a node's ranks are a contiguous block there too: base_global_rank = group_rank ×
# local_world_size, torch/distributed/elastic/agent/server/api.py, _assign_worker_ranks).
_LAUNCH_ENV = [
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
]
# Variables naming the job, the same in every rank: Azure ML's run, Open MPI 4's job id (two
# spellings), the PMIx namespace (Open MPI 5).
JOB_ID_ENV = (
    "AZUREML_RUN_ID",
    "OMPI_MCA_orte_ess_jobid",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
)


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


def job_from_env(env: dict[str, str]) -> str | None:
    """This job's identity from the launcher's environment, or None where none is set."""
    return next((f"{name}={env[name]}" for name in JOB_ID_ENV if env.get(name)), None)


def source_digests(source: Path, required: bool = False) -> dict[str, tuple[int, str]] | None:
    """{shard name: (size, md5)} from the manifest in `source`; None if it has none."""
    if not required and not (source / MANIFEST_NAME).is_file():
        return None
    try:
        manifest = load_manifest(source)
    except ManifestError as exc:
        raise TrainingError(str(exc)) from exc
    return {s.name: (s.size, s.md5) for s in manifest.shards}


def plan_shards(
    source: Path, splits: list[str], launch: Launch, digests: dict | None = None
) -> tuple[list[Path], list[Path]]:
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
        _check_one_conversion(shards, split, source, digests)
        everything.update(shards)
        for rank in launch.node_ranks:
            if split == "train":
                mine.update(shards_for_rank(shards, rank, launch.size))
            else:
                # As the training pipeline reads validation: with fewer shards than workers
                # the last ranks get none (and train without validation).
                mine.update(shards[rank :: launch.size])
    if not everything:
        raise TrainingError(f"no shards of {', '.join(splits)} in {source}")
    return sorted(Path(f) for f in mine), sorted(Path(f) for f in everything - mine)


def _check_one_conversion(shards: list[str], split: str, source: Path, digests) -> None:
    totals = sorted({_TOTAL.search(s)[1] for s in shards})
    if len(totals) > 1:
        raise TrainingError(
            f"{source} mixes {split} shards of {len(totals)} conversions "
            f"({', '.join(f'-of-{t}' for t in totals)}); training would read them all: remove "
            "the older conversion's shards or convert into an empty folder"
        )
    if digests is not None:
        unlisted = sorted(Path(s).name for s in shards if Path(s).name not in digests)
        if unlisted:
            raise TrainingError(
                f"{len(unlisted)} {split} shard(s) in {source} are not in its {MANIFEST_NAME} "
                f"(left by another conversion?): {', '.join(unlisted[:5])}; remove them"
            )


def remove_stale(dest: Path, keep: set[str], log=print) -> None:
    """Delete shard-named files and links in `dest` that are not among `keep` (by name)."""
    stale = sorted(p for p in dest.iterdir() if SHARD_FILE.match(p.name) and p.name not in keep)
    for path in stale:
        path.unlink()
    if stale:
        log(f"removed {len(stale)} shard(s) in {dest} not in the source (e.g. {stale[0].name})")


def link_others(others: list[Path], dest: Path) -> None:
    """Symbolic links in `dest` to the shards other nodes read, so `dest` lists them all.

    Each link is made under a temporary name and renamed over the old entry, so a rank that
    lists `dest` meanwhile never finds a shard missing.
    """
    for shard in others:
        link, tmp = dest / shard.name, dest / f".{shard.name}.link"
        if link.is_symlink() and os.readlink(link) == str(shard.absolute()):
            continue
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(shard.absolute())
        os.replace(tmp, link)


def copy_files(files: list[Path], dest: Path, digests: dict | None = None, log=print) -> int:
    """Copy `files` into `dest`, skipping complete copies; return the bytes copied.

    With `digests` ({name: (size, md5)}), a copy is complete only if its MD5 matches, and
    every file copied is checked against its MD5 as it is read.
    """
    dest.mkdir(parents=True, exist_ok=True)
    sizes = {f: f.stat().st_size for f in files}
    if digests is not None:
        wrong = [f.name for f in files if digests[f.name][0] != sizes[f]]
        if wrong:
            raise TrainingError(
                f"{len(wrong)} shard(s) in the source differ in size from {MANIFEST_NAME}: "
                f"{', '.join(wrong[:5])}; stage the dataset again"
            )
    md5_of = {f: digests[f.name][1] for f in files} if digests is not None else {}
    todo = [f for f in files if not _complete(dest / f.name, sizes[f], md5_of.get(f))]
    needed = sum(sizes[f] for f in todo)
    free = shutil.disk_usage(dest).free
    if needed * FREE_SPACE_MARGIN > free:
        raise TrainingError(
            f"not enough free space in {dest}: {len(todo)} shard(s) need {needed / 1e9:.2f} GB "
            f"(+2% margin), {free / 1e9:.2f} GB free; make room or use a larger disk (the mount "
            "storage mode needs no local disk)"
        )
    log(
        f"copying {len(todo)} shard(s), {needed / 1e9:.2f} GB, to {dest} "
        f"({len(files) - len(todo)} already there)"
    )
    start = last_log = time.monotonic()
    done = 0
    for i, f in enumerate(todo, 1):
        partial = dest / f".{f.name}.partial"
        md5 = _copy(f, partial)
        if f in md5_of and md5 != md5_of[f]:
            partial.unlink()
            raise TrainingError(
                f"{f} does not match the MD5 in {MANIFEST_NAME} (read {md5}, listed "
                f"{md5_of[f]}); stage the dataset again"
            )
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


def _copy(src: Path, dst: Path) -> str:
    """Copy `src` to `dst`, returning the MD5 of the bytes written."""
    md5 = hashlib.md5()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            md5.update(chunk)
            fout.write(chunk)
    return md5.hexdigest()


def _complete(path: Path, size: int, md5: str | None = None) -> bool:
    if not path.is_file() or path.is_symlink() or path.stat().st_size != size:
        return False
    return md5 is None or file_md5(path) == md5


def _replace_file(src: Path, dst: Path) -> None:
    tmp = dst.parent / f".{dst.name}.partial"
    shutil.copyfile(src, tmp)
    tmp.replace(dst)


def _write_marker(path: Path, content: dict) -> None:
    tmp = path.parent / f"{path.name}.tmp"
    tmp.write_text(json.dumps(content))
    tmp.replace(path)


def run_node_copy(
    source: Path,
    dest: Path,
    splits: list[str],
    launch: Launch,
    timeout: float,
    log=print,
    job: str | None = None,
) -> None:
    """Local rank 0 copies and marks the folder done; the other local ranks wait for the mark.

    Both marks carry `job`, and a waiting rank heeds only marks of its own job, so a mark left
    on the node by an earlier job is never taken for this one's.
    """
    started = time.time()
    digests = source_digests(source)
    files, others = plan_shards(source, splits, launch, digests)
    expected = {f.name: f.stat().st_size for f in files}
    done_marker, failed_marker = dest / DONE_MARKER, dest / FAILED_MARKER
    if launch.local_rank == 0:
        dest.mkdir(parents=True, exist_ok=True)
        done_marker.unlink(missing_ok=True)
        failed_marker.unlink(missing_ok=True)
        try:
            remove_stale(dest, {f.name for f in [*files, *others]}, log)
            copy_files(files, dest, digests, log)
            link_others(others, dest)
            if digests is not None:  # training counts examples from it
                _replace_file(source / MANIFEST_NAME, dest / MANIFEST_NAME)
            else:
                (dest / MANIFEST_NAME).unlink(missing_ok=True)
        except (OSError, TrainingError) as exc:
            _write_marker(failed_marker, {"job": job, "error": str(exc)})
            raise
        _write_marker(done_marker, {"job": job, "source": str(source), "files": expected})
        log(
            f"node ranks {launch.node_ranks.start}-{launch.node_ranks.stop - 1}: "
            f"{len(files)} shard(s) ready in {dest}"
        )
        return
    log(f"local rank {launch.local_rank} waiting for local rank 0 to copy {len(files)} shard(s)")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        failed = _marker(failed_marker, job, started)
        if failed is not None:
            raise TrainingError(f"local rank 0 failed to copy: {failed.get('error')}")
        done = _marker(done_marker, job, started)
        if done is not None:
            if done.get("files") != expected:
                raise TrainingError(
                    f"local rank 0 copied other shards to {dest} than this rank expects "
                    "(did --source change during the copy?)"
                )
            return
        time.sleep(0.5)
    raise TrainingError(f"local rank 0 did not finish copying to {dest} within {timeout:.0f} s")


def _marker(path: Path, job: str | None, started: float) -> dict | None:
    """The marker's content if it is this job's, else None (absent, being written, or stale)."""
    try:
        content = json.loads(path.read_text())
        written = path.stat().st_mtime
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(content, dict) or content.get("job") != job:
        return None
    if job is None and written < started - UNIDENTIFIED_JOB_SLACK_S:
        return None
    return content


def run_copy_all(source: Path, dest: Path, log=print) -> None:
    """Copy every shard of the manifest in `source`, then the manifest, to `dest`, verified.

    A manifest in `dest` other than this one is removed before anything changes there, so an
    interrupted run leaves no old manifest beside a mixed set of shards; a rerun copies only
    what is missing or different.
    """
    digests = source_digests(source, required=True)
    absent = sorted(name for name in digests if not (source / name).is_file())
    if absent:
        raise TrainingError(
            f"{len(absent)} shard(s) listed in {source / MANIFEST_NAME} are not in {source}: "
            f"{', '.join(absent[:5])}; stage the dataset again"
        )
    unlisted = sorted(p.name for p in source.iterdir() if SHARD_FILE.match(p.name))
    unlisted = [name for name in unlisted if name not in digests]
    if unlisted:
        log(f"leaving out {len(unlisted)} shard(s) not in the manifest: {', '.join(unlisted[:5])}")
    dest.mkdir(parents=True, exist_ok=True)
    manifest = dest / MANIFEST_NAME
    in_place = manifest.is_file() and file_md5(manifest) == file_md5(source / MANIFEST_NAME)
    if not in_place:
        manifest.unlink(missing_ok=True)
    remove_stale(dest, set(digests), log)
    files = [source / name for name in sorted(digests)]
    copy_files(files, dest, digests, log)
    if not in_place:
        _replace_file(source / MANIFEST_NAME, manifest)
    total = sum(size for size, _ in digests.values())
    log(f"{len(files)} shard(s), {total / 1e9:.2f} GB, and {MANIFEST_NAME} verified in {dest}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="azdl data copy",
        description="Copy the shards this node's ranks read from a mounted folder to local "
        "disk (local rank 0 copies, the others wait; run once per worker under the MPI "
        "launch), or with --all every shard and the manifest (one process; fills the NFS "
        "share).",
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
        if args.all:
            if launch.size > 1:
                raise TrainingError(
                    f"--all runs as one process, but this is rank {launch.rank} of "
                    f"{launch.size}; submit it as a single-process job"
                )
            run_copy_all(args.source, args.dest, log)
        else:
            job = args.job_id or job_from_env(dict(os.environ))
            if job is None and launch.local_size > 1:
                log(
                    "no job identity (--job-id, $AZUREML_RUN_ID, Open MPI's job id): copy "
                    f"markers count if written up to {UNIDENTIFIED_JOB_SLACK_S:.0f} s before "
                    "this rank started"
                )
            run_node_copy(args.source, args.dest, splits, launch, args.timeout, log, job)
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
