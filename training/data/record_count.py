"""How many training examples a TFRecord split holds, counted once for the whole job: from the
manifest when there is one, else each worker counts its own shards from the record headers and
the counts are exchanged with one `allgather_object` (docs/architecture.md, "Counting records").
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from training.data.tfrecord import index_file
from training.errors import TrainingError

_COUNTS: dict[str, int] = {}  # shard path → records, for the life of this process


def count_records(path: str) -> int:
    """Records in one TFRecord file, from its record headers alone (a seek past each record's
    data: nothing is decoded, and no framework is needed, so every flavour counts the same way)."""
    return len(index_file(path))


def count_examples(
    data_dir: str,
    files: list[str],
    rank: int = 0,
    size: int = 1,
    gather: Callable[[dict], list[dict]] | None = None,
    threads: int = 1,
    count_file: Callable[[str], int] | None = None,
    cache: dict[str, int] | None = None,
) -> int:
    """Training examples in `files` (every worker passes the same list and gets the same total).

    `gather`: the flavour's `hvd.allgather_object` (every worker must call this function then);
    None in a single process, which counts every file itself. `count_file`: records in one
    shard (default `count_records`). `cache`: shard → count, this process's by default.
    """
    known = _COUNTS if cache is None else cache
    manifest = Path(data_dir) / "manifest.json"
    if manifest.exists():
        from training.data.prepare.manifest import load_manifest

        return load_manifest(manifest).splits["train"].num_examples
    own = files[rank::size] if gather is not None else files
    todo = [f for f in own if f not in known]
    with ThreadPoolExecutor(max(1, threads)) as pool:
        known.update(zip(todo, pool.map(count_file or count_records, todo), strict=True))
    if gather is not None:
        for theirs in gather({f: known[f] for f in files if f in known}):
            known.update(theirs)
    missing = [f for f in files if f not in known]
    if missing:  # every file is some rank's own, so this means ranks disagree on `files`
        raise TrainingError(f"no record count for {len(missing)} shard(s), e.g. {missing[0]!r}")
    return sum(known[f] for f in files)
