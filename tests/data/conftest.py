"""Azurite, the Azure Storage emulator, for the staging tests: one in-memory blob service per
test session on a free loopback port, plus a fresh container per test."""

import itertools
import os
import random
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from azdl.envs import REPO_ROOT
from training.dataprep.manifest import Manifest, ShardEntry, SplitSummary, file_digests

AZURITE = REPO_ROOT / "node_modules" / ".bin" / "azurite-blob"
# Azurite's published development account key (not a secret: it is in Microsoft's docs).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Azurite:
    port: int

    def connection_string(self, key: str = DEV_KEY) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={key};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{DEV_ACCOUNT};"
        )

    def service(self) -> BlobServiceClient:
        return BlobServiceClient.from_connection_string(self.connection_string())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    if not AZURITE.exists():
        pytest.fail(f"Azurite is not installed ({AZURITE}); run scripts/setup-azurite.sh")
    port = _free_port()
    log = tmp_path_factory.mktemp("azurite") / "azurite.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(AZURITE), "--inMemoryPersistence", "--blobHost", "127.0.0.1",
             "--blobPort", str(port), "--skipApiVersionCheck", "--loose", "--silent",
             "--disableTelemetry"],
            stdout=out, stderr=subprocess.STDOUT, cwd=log.parent,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Azurite did not start on port {port}: {log.read_text()}")
                time.sleep(0.1)
        yield Azurite(port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


_names = itertools.count()


@pytest.fixture
def container(azurite):
    """A new, empty container; the emulator's connection string is in the environment."""
    client = azurite.service().create_container(f"data{os.getpid()}x{next(_names)}")
    yield client


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
