"""A staged dataset as `azdl data` writes it, for the staging and Azure tests."""

import random
from pathlib import Path

import pytest

from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary, file_digests


@pytest.fixture
def make_dataset():
    return _make_dataset


def _make_dataset(folder: Path, sizes: list[int], seed: int = 0) -> Manifest:
    """Shard-named files of random bytes with a manifest: what `azdl data stage` reads.

    The stager never looks inside shards, so random bytes stand in for TFRecords here (the
    operator environment has no TensorFlow); the training tests convert real JPEGs.
    """
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, size in enumerate(sizes):
        name = f"train-{i:05d}-of-{len(sizes):05d}"
        (folder / name).write_bytes(rng.randbytes(size))
        entries.append(ShardEntry(name, "train", 1, *file_digests(folder / name)))
    manifest = Manifest(
        label_map={"n00000001": 0},
        splits={"train": SplitSummary(len(sizes), len(sizes), {"n00000001": len(sizes)})},
        shards=entries,
    )
    manifest.write(folder)
    return manifest
