"""Run Azurite, the Azure Storage emulator (npm, installed by scripts/setup-azurite.sh), on a
free loopback port with in-memory storage: for the staging tests and the P5 benchmark."""

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from azdl.envs import REPO_ROOT
from azdl.errors import AzdlError

AZURITE_BLOB = REPO_ROOT / "node_modules" / ".bin" / "azurite-blob"
# Azurite's published development account (from Microsoft's documentation; not a secret).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class Azurite:
    port: int

    def connection_string(self, key: str = DEV_KEY) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={key};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{DEV_ACCOUNT};"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_azurite(timeout: float = 30.0) -> Iterator[Azurite]:
    """Start the blob emulator, wait until it accepts connections, stop it on exit."""
    if not AZURITE_BLOB.exists():
        raise AzdlError(f"Azurite is not installed ({AZURITE_BLOB}); run scripts/setup-azurite.sh")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="azurite-") as workdir:
        log = Path(workdir) / "azurite.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [
                    str(AZURITE_BLOB),
                    "--inMemoryPersistence",
                    "--blobHost",
                    "127.0.0.1",
                    "--blobPort",
                    str(port),
                    "--skipApiVersionCheck",
                    "--loose",
                    "--silent",
                    "--disableTelemetry",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=workdir,
            )
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AzdlError(
                            f"Azurite did not start on port {port}: {log.read_text()}"
                        ) from None
                    time.sleep(0.1)
            yield Azurite(port)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
