"""Upload shards and their manifest to a blob container, resumably, and verify every blob.

Credentials: Microsoft Entra ID through azure-identity's DefaultAzureCredential (az login,
a managed identity, workload identity…) for real accounts; a connection string from the
environment only for the local emulator (Azurite). No keys in code or config.

A blob counts as uploaded when its size and Content-MD5 match the manifest. Each file is read
once: hashed as the upload reads it, and the upload is abandoned before its last bytes leave
(so before the blob exists) if they differ from the manifest. Uploads set Content-MD5 to the
manifest's digest. A single-request upload (up to 32 MiB) is checked against it by the
service; a larger file goes up as blocks, each with a transfer MD5 the service checks, but
the service stores the whole-blob Content-MD5 as given without checking it. So the
properties cannot reveal a block blob whose stored bytes differ at the same size: reading the
blobs back (`download_verify`, or `verify_sample` random ones) is the check that trusts nothing.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlparse

from azdl import credentials
from azdl.errors import AzdlError, Unreachable
from training.data.prepare.manifest import (
    MANIFEST_NAME,
    SHARD_FILE,
    Manifest,
    ManifestError,
    ShardEntry,
    file_digests,
    load_manifest,
)

if TYPE_CHECKING:  # the storage SDK and rich are imported where used: `azdl data stage` checks
    # its folder, and refuses bad input, before it loads them
    from azure.storage.blob import ContainerClient
    from rich.console import Console

CONNECTION_STRING_ENV = "AZURE_STORAGE_CONNECTION_STRING"
SINGLE_PUT_MAX = 32 * 1024 * 1024
BLOCK_SIZE = 8 * 1024 * 1024
CONNECT_TIMEOUT_S = 10
_EMULATOR_HOSTS = {"127.0.0.1", "localhost", "::1"}


@dataclass
class StageReport:
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already there with the right MD5
    failed: dict[str, str] = field(default_factory=dict)  # name -> why
    missing: list[str] = field(default_factory=list)  # after verification
    different: list[str] = field(default_factory=list)  # after verification
    unlisted: list[str] = field(default_factory=list)  # shard blobs the manifest does not list
    read_back: int = 0  # blobs downloaded and checked by content
    bytes_uploaded: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.failed or self.missing or self.different or self.unlisted)

    @property
    def mb_per_s(self) -> float:
        return self.bytes_uploaded / 1e6 / self.seconds if self.seconds else 0.0


def target_from_outputs(outputs: dict, source: str) -> tuple[str, str]:
    """(dataAccountUrl, dataContainerName) of a deployed stack: all that staging needs, so a
    stack whose cluster or images are not deployed yet can already be filled."""
    keys = ("dataAccountUrl", "dataContainerName")
    missing = [k for k in keys if not outputs.get(k)]
    if missing:
        raise AzdlError(
            f"{source} has no {', '.join(missing)}; is the stack deployed with this "
            "version of azdl (`pulumi up`)?"
        )
    return outputs[keys[0]], outputs[keys[1]]


def container_client(
    container: str, account_url: str | None = None, connection_string: str | None = None
) -> ContainerClient:
    """A client for `container`: Entra ID for `account_url`, or the emulator's connection string."""
    from azure.storage.blob import BlobServiceClient, ExponentialRetry

    # Files up to 32 MiB go up in one request (fewest round trips); larger ones (ImageNet's
    # train shards are ~140 MB) as 8 MiB blocks, `max_concurrency` of them at once.
    # An endpoint that does not answer fails in bounded time (about 25 s): a 10 s connection
    # timeout and one retry on connection errors, where the SDK's defaults (ExponentialRetry:
    # 15 s initial back-off, 3 retries) spend over a minute. Transient service errors still get
    # 4 retries (back-off 2, 4, 6, 10 s).
    tuning = dict(
        max_single_put_size=SINGLE_PUT_MAX,
        max_block_size=BLOCK_SIZE,
        connection_timeout=CONNECT_TIMEOUT_S,
        retry_policy=ExponentialRetry(
            initial_backoff=2, increment_base=2, retry_total=4, random_jitter_range=1,
            retry_connect=1,
        ),
    )  # fmt: skip
    if connection_string:
        if not _is_emulator(connection_string):
            raise AzdlError(
                f"{CONNECTION_STRING_ENV} is only for the local emulator (Azurite on loopback); "
                "real accounts use Microsoft Entra ID: unset it and sign in (az login) or run "
                "with a managed identity"
            )
        service = BlobServiceClient.from_connection_string(connection_string, **tuning)
    elif account_url:
        service = BlobServiceClient(
            account_url, credential=credentials.credential(credentials.STORAGE_SCOPE), **tuning
        )
    else:
        raise AzdlError(
            "no storage account: give --stack STACK, --outputs FILE or --account-url URL "
            f"(or {CONNECTION_STRING_ENV} for the emulator)"
        )
    return service.get_container_client(container)


def _is_emulator(connection_string: str) -> bool:
    parts = dict(p.split("=", 1) for p in connection_string.split(";") if "=" in p)
    if parts.get("UseDevelopmentStorage", "").lower() == "true":
        return True
    return urlparse(parts.get("BlobEndpoint", "")).hostname in _EMULATOR_HOSTS


def check_access(container: ContainerClient) -> None:
    """Fail early, before any upload, with what is wrong: credentials, rights or container."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
        ServiceRequestError,
    )

    from azdl.propagation import while_propagating

    where = f"container {container.container_name!r} at {container.primary_endpoint}"
    try:
        while_propagating(container.get_container_properties, f"reading {where}")
    except ResourceNotFoundError as exc:
        raise AzdlError(
            f"{where} does not exist; the stack creates it (output dataContainerName): check "
            "--container / --stack / --outputs, or deploy the stack first"
        ) from exc
    except ClientAuthenticationError as exc:
        raise AzdlError(
            f"the storage account rejected the credentials for {where}: {_first_line(exc)}; "
            "sign in with `az login` (or use a managed identity) as a principal with "
            "Storage Blob Data Contributor on the account"
        ) from exc
    except HttpResponseError as exc:
        code = getattr(exc.error_code, "value", exc.error_code)
        if exc.status_code == 403:
            why = _FORBIDDEN.get(code, "access denied")
            raise AzdlError(
                f"the storage account refused access to {where} ({code}): {why}"
            ) from exc
        raise AzdlError(f"cannot use {where}: {_first_line(exc)}") from exc
    except ServiceRequestError as exc:
        raise Unreachable(f"cannot reach {container.primary_endpoint}: {_first_line(exc)}") from exc


_FORBIDDEN = {
    "AuthenticationFailed": "the credentials were rejected (wrong account key or expired token)",
    "AuthorizationPermissionMismatch": "the signed-in principal needs the Storage Blob Data "
    "Contributor role on the data account",
    "AuthorizationFailure": "wrong credentials, or the account's network rules do not admit this "
    "machine (prod stacks allow private endpoints only)",
}


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def blob_name(prefix: str, name: str) -> str:
    return f"{prefix.strip('/')}/{name}" if prefix.strip("/") else name


def _remote_state(container: ContainerClient, prefix: str) -> dict[str, tuple[int, str | None]]:
    """{blob name: (size, Content-MD5 as hex or None)} under `prefix`."""
    state = {}
    start = blob_name(prefix, "")
    for blob in container.list_blobs(name_starts_with=start or None):
        md5 = blob.content_settings.content_md5
        state[blob.name] = (blob.size, bytes(md5).hex() if md5 else None)
    return state


def check_folder(directory: Path) -> tuple[Manifest, ShardEntry]:
    """The manifest of the shards folder and the manifest's own entry, checked before anything
    remote is touched (`azdl data stage` calls it before the sign-in): the folder exists, its
    manifest reads, and every shard it lists is there."""
    if not directory.exists():
        raise AzdlError(
            f"{directory} does not exist; give the folder `azdl data prepare --output` wrote"
        )
    if not directory.is_dir():
        raise AzdlError(
            f"{directory} is a file; give the folder of the shards and {MANIFEST_NAME} "
            "(`azdl data prepare --output`)"
        )
    try:
        manifest = load_manifest(directory)
    except ManifestError as exc:
        raise AzdlError(str(exc)) from exc
    absent = [s.name for s in manifest.shards if not (directory / s.name).is_file()]
    if absent:
        raise AzdlError(
            f"{len(absent)} shard(s) listed in the manifest are not in {directory}: "
            f"{', '.join(absent[:10])}"
        )
    size, md5, sha256 = file_digests(directory / MANIFEST_NAME)
    return manifest, ShardEntry(MANIFEST_NAME, "", 0, size, md5, sha256)


def stage(
    directory: Path,
    container: ContainerClient,
    prefix: str = "",
    parallel_files: int = 4,
    max_concurrency: int = 4,
    download_verify: bool = False,
    console: Console | None = None,
    verify_sample: int = 0,
) -> StageReport:
    """Upload what is missing or different, then verify every blob against the manifest.

    Before the first shard upload the remote manifest is deleted, and it goes up again last,
    once every shard is in place: an interrupted run never leaves the old manifest beside a
    mix of old and new shards.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    directory = Path(directory)
    manifest, manifest_entry = check_folder(directory)
    size, md5 = manifest_entry.size, manifest_entry.md5
    files = [*manifest.shards, manifest_entry]
    check_access(container)

    report = StageReport()
    remote = _remote_state(container, prefix)
    shards = []
    for entry in manifest.shards:
        if remote.get(blob_name(prefix, entry.name)) == (entry.size, entry.md5):
            report.skipped.append(entry.name)
        else:
            shards.append(entry)
    remote_manifest = blob_name(prefix, MANIFEST_NAME)
    if shards and remote_manifest in remote:
        _delete_blob(container, remote_manifest)
        del remote[remote_manifest]
    if remote.get(remote_manifest) == (size, md5):
        report.skipped.append(MANIFEST_NAME)
        last = []
    else:
        last = [manifest_entry]
    todo = [*shards, *last]

    console = console or Console(stderr=True)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    ]
    start = time.perf_counter()
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(
            f"uploading {len(todo)} of {len(files)} files", total=sum(e.size for e in todo)
        )
        uploader = _Uploader(container, directory, prefix, max_concurrency, progress, bar, report)
        pool = ThreadPoolExecutor(max_workers=max(1, parallel_files))
        try:
            for future in as_completed([pool.submit(uploader.upload, e) for e in shards]):
                future.result()
        finally:  # on Ctrl-C, start no further file; the blobs done so far stay
            pool.shutdown(cancel_futures=True)
        if not report.failed:
            for entry in last:
                uploader.upload(entry)
    report.seconds = time.perf_counter() - start
    result = verify(container, prefix, files, download_verify, verify_sample)
    report.missing, report.different, report.unlisted, report.read_back = result
    return report


def _delete_blob(container: ContainerClient, name: str) -> None:
    from azure.core.exceptions import AzureError, ResourceNotFoundError

    try:
        container.delete_blob(name)
    except ResourceNotFoundError:
        pass  # gone already
    except AzureError as exc:
        raise AzdlError(
            f"cannot delete the old manifest blob {name!r} before replacing shards (nothing "
            f"was uploaded): {_first_line(exc)}"
        ) from exc


class _LocalFileChanged(Exception):
    """The local file's bytes differ from the manifest (found while uploading it)."""


class _HashingReader:
    """A local file as the upload reads it, front to back, once.

    The upload reads a file of up to 32 MiB in one call before its single request, and a
    larger one block by block before each block's request, committing the blob only after the
    last: raising on the read that completes the file stops the upload before a blob with
    other bytes than the manifest's can exist.
    """

    def __init__(self, file, entry: ShardEntry):
        self.file, self.entry = file, entry
        self.md5, self.read_bytes = hashlib.md5(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.md5.update(data)
        self.read_bytes += len(data)
        if (not data or self.read_bytes >= self.entry.size) and (
            self.read_bytes != self.entry.size or self.md5.hexdigest() != self.entry.md5
        ):
            raise _LocalFileChanged
        return data


class _Uploader:
    """Uploads one file at a time per call; shared by the pool's threads."""

    def __init__(self, container, directory, prefix, max_concurrency, progress, bar, report):
        self.container, self.directory, self.prefix = container, directory, prefix
        self.max_concurrency = max_concurrency
        self.progress, self.bar, self.report = progress, bar, report
        self.lock = threading.Lock()

    def upload(self, entry: ShardEntry) -> None:
        """Upload one file; any failure is recorded in the report, not raised."""
        from azure.core.exceptions import AzureError
        from azure.storage.blob import ContentSettings

        sent = 0

        def advance(current: int, _total: int | None) -> None:
            nonlocal sent
            with self.lock:
                self.progress.advance(self.bar, current - sent)
                sent = current

        try:
            path = self.directory / entry.name
            if path.stat().st_size != entry.size:
                raise _LocalFileChanged
            with open(path, "rb") as f:
                self.container.upload_blob(
                    blob_name(self.prefix, entry.name),
                    _HashingReader(f, entry),
                    length=entry.size,
                    overwrite=True,
                    max_concurrency=self.max_concurrency,
                    # A single put is checked against Content-MD5 by the service itself;
                    # blocks need their own transfer MD5s (the whole-blob one is not checked).
                    validate_content=entry.size > SINGLE_PUT_MAX,
                    content_settings=ContentSettings(
                        content_type="application/octet-stream",
                        content_md5=bytearray(entry.content_md5),
                    ),
                    progress_hook=advance,
                )
        except _LocalFileChanged:
            why = "the local file differs from the manifest; rerun `azdl data prepare`"
        except (AzureError, OSError) as exc:  # HTTP, connection, timeouts, local I/O
            why = f"{type(exc).__name__}: {_first_line(exc)}"
        else:
            with self.lock:
                self.report.uploaded.append(entry.name)
                self.report.bytes_uploaded += entry.size
            return
        with self.lock:
            self.report.failed[entry.name] = why
            self.progress.advance(self.bar, entry.size - sent)


class Verification(NamedTuple):
    missing: list[str]  # in the manifest, not in the container
    different: list[str]  # size or MD5 differs from the manifest
    unlisted: list[str]  # shard-named blobs the manifest does not list (training would read them)
    read_back: int  # blobs downloaded and checked by content


def verify(
    container: ContainerClient,
    prefix: str,
    files: list[ShardEntry],
    download: bool = False,
    sample: int = 0,
) -> Verification:
    """Compare the blobs under `prefix` with the manifest by size and Content-MD5.

    `download`: also read every blob back and check its MD5; `sample`: that for `sample`
    blobs picked at random among those whose properties match.
    """
    remote = _remote_state(container, prefix)
    missing, different, matching = [], [], []
    for entry in files:
        state = remote.get(blob_name(prefix, entry.name))
        if state is None:
            missing.append(entry.name)
        elif state != (entry.size, entry.md5):
            different.append(entry.name)
        else:
            matching.append(entry)
    to_read = matching if download else random.sample(matching, min(sample, len(matching)))
    for entry in to_read:
        if _md5(container.download_blob(blob_name(prefix, entry.name)).chunks()) != entry.md5:
            different.append(entry.name)
    order = {entry.name: i for i, entry in enumerate(files)}
    different.sort(key=order.__getitem__)
    listed = {blob_name(prefix, entry.name) for entry in files}
    folder = blob_name(prefix, "")
    unlisted = sorted(
        name[len(folder) :]
        for name in remote
        if name not in listed and SHARD_FILE.match(name[len(folder) :])
    )
    return Verification(missing, different, unlisted, len(to_read))


def _md5(chunks) -> str:
    md5 = hashlib.md5()
    for chunk in chunks:
        md5.update(chunk)
    return md5.hexdigest()
