"""Azurite, the Azure Storage emulator, for the staging tests: one in-memory blob service per
test session on a free loopback port (azdl.azurite), plus a fresh container per test."""

import itertools
import os
import random
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from azdl.azurite import running_azurite
from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary, file_digests


@pytest.fixture(scope="session")
def azurite():
    with running_azurite() as emulator:
        yield emulator


_names = itertools.count()


@pytest.fixture
def container(azurite):
    """A new, empty container in the emulator."""
    service = BlobServiceClient.from_connection_string(azurite.connection_string())
    return service.create_container(f"data{os.getpid()}x{next(_names)}")


@pytest.fixture
def emulator_env(azurite, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string())


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
