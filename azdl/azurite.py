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

from azdl.envs import PACKAGES_ROOT
from azdl.errors import AzdlError

AZURITE_BLOB = PACKAGES_ROOT / "node_modules" / ".bin" / "azurite-blob"
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


START_ATTEMPTS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_azurite(timeout: float = 30.0) -> Iterator[Azurite]:
    """Start the blob emulator, wait until it accepts connections, stop it on exit.

    The port is found free before Azurite binds it, so another process may take it in
    between: then Azurite exits with EADDRINUSE and is started again on another port.
    """
    if not AZURITE_BLOB.exists():
        raise AzdlError(f"Azurite is not installed ({AZURITE_BLOB}); run scripts/setup-azurite.sh")
    with tempfile.TemporaryDirectory(prefix="azurite-") as workdir:
        log = Path(workdir) / "azurite.log"
        for attempt in range(1, START_ATTEMPTS + 1):
            port = _free_port()
            proc = _start(port, workdir, log)
            try:
                if _wait_until_listening(proc, port, log, timeout):
                    break
            except BaseException:
                _stop(proc)
                raise
            _stop(proc)
            if attempt == START_ATTEMPTS:
                raise AzdlError(
                    f"Azurite found every port taken ({START_ATTEMPTS} tries): {log.read_text()}"
                )
        try:
            yield Azurite(port)
        finally:
            _stop(proc)


def _start(port: int, workdir: str, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
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


def _wait_until_listening(proc: subprocess.Popen, port: int, log: Path, timeout: float) -> bool:
    """True once this Azurite listens on `port`; False if it exited because the port was taken.

    Readiness is Azurite's own "listens on" line, not only a connection: a process that took
    the port would accept connections too.
    """
    listening = f"listens on http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text()
        if proc.poll() is not None:
            if "EADDRINUSE" in text:
                return False
            raise AzdlError(f"Azurite did not start on port {port}: {text}")
        if listening in text:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise AzdlError(f"Azurite did not start on port {port} within {timeout:.0f} s: {text}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
