"""Find the TFRecord shards of a split and give each worker its own (stdlib only).

Shards are split by GLOBAL rank: every worker of every node reads a different subset. (The
reference implementation split by local rank, so all nodes read the same files.) The node-side
copy step imports this module too, so it must not import TensorFlow.
"""

import re
from pathlib import Path

from training.errors import TrainingError

SPLITS = ("train", "validation")
_SHARD_NAME = re.compile(r"^(?P<split>[a-z]+)-(?P<index>\d{5})-of-(?P<total>\d{5})$")


def shard_name(split: str, index: int, total: int) -> str:
    """`train-00000-of-01024`: the name of shard `index` of `total` in `split`."""
    if split not in SPLITS:
        raise TrainingError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    if not 0 <= index < total:
        raise TrainingError(f"shard index {index} is outside 0..{total - 1}")
    return f"{split}-{index:05d}-of-{total:05d}"


def list_shards(data_dir: str | Path, split: str) -> list[str]:
    """Sorted paths of `split`'s shards in `data_dir`; a clear error if there are none."""
    if split not in SPLITS:
        raise TrainingError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    root = Path(data_dir)
    if not root.is_dir():
        raise TrainingError(f"data directory {str(root)!r} does not exist or is not a directory")
    shards = sorted(
        str(p)
        for p in root.iterdir()
        if p.is_file() and (m := _SHARD_NAME.match(p.name)) and m["split"] == split
    )
    if not shards:
        raise TrainingError(
            f"no {split} shards in {str(root)!r}: expected files named like "
            f"{shard_name(split, 0, 1024)}"
        )
    return shards


def shards_for_rank(shards: list[str], rank: int, size: int) -> list[str]:
    """The shards global rank `rank` of `size` workers reads: every size-th one, from `rank`."""
    if not 0 <= rank < size:
        raise TrainingError(f"rank {rank} is outside 0..{size - 1}")
    if size > len(shards):
        raise TrainingError(
            f"{size} workers but only {len(shards)} shard(s): every worker needs at least one "
            "shard; use at most as many workers as shards, or write more shards"
        )
    return shards[rank::size]


def validation_shards(data_dir: str | Path, required: bool) -> list[str]:
    """Every validation shard of `data_dir`; none when it has no validation split and validation
    is not `required` (--val-steps), which trains without validation. Split by rank like the
    train shards, a worker may get none: it evaluates nothing, and counts summed over workers
    stay right."""
    try:
        return list_shards(data_dir, "validation")
    except TrainingError:
        if required:
            raise
        return []
