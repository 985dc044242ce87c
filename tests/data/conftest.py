"""Azurite, the Azure Storage emulator, for the staging tests: one in-memory blob service per
test session on a free loopback port (azdl.azurite), plus a fresh container per test; and a
staged dataset (tests/support/datasets.py)."""

import itertools
import os

import pytest
from azure.storage.blob import BlobServiceClient

from azdl.azurite import running_azurite
from tests.support.datasets import make_dataset  # noqa: F401  (a fixture: registered by import)


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
