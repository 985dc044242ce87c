"""Azurite's start-up on a free port, when another process takes that port first."""

import socket

import pytest
from azure.storage.blob import BlobServiceClient

from azdl import azurite

pytestmark = pytest.mark.slow


def test_azurite_starts_again_on_another_port_when_its_port_is_taken(monkeypatch):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()  # accepts connections, as a process that won the race would
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        free_port = azurite._free_port
        monkeypatch.setattr(azurite, "_free_port", lambda: next(ports, None) or free_port())
        with azurite.running_azurite() as emulator:
            assert emulator.port != taken
            service = BlobServiceClient.from_connection_string(emulator.connection_string())
            assert service.create_container("probe").get_container_properties().name == "probe"
