"""`azdl data stage` against Azurite: full upload, interruption and resume, corruption,
wrong credentials, missing container, upload errors, a changed dataset on the same prefix."""

import base64
import builtins
import io
import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from azure.core.exceptions import ServiceResponseError
from azure.storage.blob import BlobBlock, ContainerClient, ContentSettings
from rich.console import Console

from azdl import staging
from azdl.cli import main
from azdl.envs import PACKAGES_ROOT

pytestmark = pytest.mark.slow
MB = 1024 * 1024


def _quiet() -> Console:
    return Console(file=io.StringIO())


def _etags(container, prefix=""):
    return {b.name: b.etag for b in container.list_blobs(name_starts_with=prefix or None)}


def test_full_upload_then_rerun_uploads_nothing(
    tmp_path, container, emulator_env, capsys, make_dataset
):
    # 40 MiB goes up as parallel blocks (above the 32 MiB single-put limit); the rest as one put.
    manifest = make_dataset(tmp_path, [40 * MB, 3 * MB, 200_000, 1])
    args = ["data", "stage", str(tmp_path), "--container", container.container_name]

    assert main([*args, "--download-verify"]) == 0
    out = capsys.readouterr().out
    assert "uploaded 5 file(s)" in out and "0 missing, 0 different" in out
    blobs = {b.name: b for b in container.list_blobs()}
    assert set(blobs) == {s.name for s in manifest.shards} | {"manifest.json"}
    for shard in manifest.shards:
        assert container.download_blob(shard.name).readall() == (tmp_path / shard.name).read_bytes()
        assert bytes(blobs[shard.name].content_settings.content_md5).hex() == shard.md5
    committed, _ = container.get_blob_client(manifest.shards[0].name).get_block_list("committed")
    assert len(committed) == 5  # 40 MiB as 8 MiB blocks

    before = _etags(container)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "uploaded 0 file(s)" in out and "5 already in place" in out
    assert _etags(container) == before  # nothing rewritten


def test_interrupted_upload_resumes_with_nothing_missing_or_corrupt(
    tmp_path, azurite, container, make_dataset
):
    manifest = make_dataset(tmp_path, [4 * MB] * 16, seed=1)
    env = {**os.environ, staging.CONNECTION_STRING_ENV: azurite.connection_string()}
    cmd = [
        sys.executable,
        "-m",
        "azdl",
        "data",
        "stage",
        str(tmp_path),
        "--container",
        container.container_name,
        "--prefix",
        "imagenet",
        "--parallel-files",
        "1",
        "--max-concurrency",
        "1",
    ]
    proc = subprocess.Popen(
        cmd, env=env, cwd=PACKAGES_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if len(_etags(container, "imagenet/")) >= 2:
            proc.kill()  # as hard as a lost connection or a closed laptop
            break
        time.sleep(0.005)
    proc.wait()
    first = _etags(container, "imagenet/")
    assert 2 <= len(first) < 16, f"the upload was not interrupted midway: {len(first)} blobs"
    assert "imagenet/manifest.json" not in first

    client = staging.container_client(container.container_name, None, azurite.connection_string())
    report = staging.stage(tmp_path, client, "imagenet", download_verify=True, console=_quiet())

    assert report.ok, report
    assert (report.missing, report.different, report.failed) == ([], [], {})
    assert sorted(f"imagenet/{name}" for name in report.skipped) == sorted(first)
    assert len(report.uploaded) == 17 - len(first)
    after = _etags(container, "imagenet/")
    assert {name: after[name] for name in first} == first  # finished work left alone
    assert set(after) == {f"imagenet/{s.name}" for s in manifest.shards} | {
        "imagenet/manifest.json"
    }
    for shard in manifest.shards:
        data = container.download_blob(f"imagenet/{shard.name}").readall()
        assert data == (tmp_path / shard.name).read_bytes()


def test_verification_finds_missing_and_corrupt_blobs(
    tmp_path, container, emulator_env, capsys, make_dataset
):
    manifest = make_dataset(tmp_path, [MB, MB, MB], seed=2)
    args = ["data", "stage", str(tmp_path), "--container", container.container_name]
    assert main(args) == 0
    files = manifest.shards
    corrupt, disguised, deleted = (s.name for s in files)

    # Other bytes under the right name: size and Content-MD5 give it away.
    container.upload_blob(corrupt, os.urandom(MB - 7), overwrite=True)
    # Same size, and a Content-MD5 property that still claims the manifest's digest (block
    # uploads do not check it): only reading the blob back reveals it.
    blob = container.get_blob_client(disguised)
    blob.stage_block("b1", os.urandom(MB))
    blob.commit_block_list(
        [BlobBlock("b1")],
        content_settings=ContentSettings(content_md5=bytearray(files[1].content_md5)),
    )
    container.delete_blob(deleted)

    container.upload_blob("train-00007-of-00008", b"from an older conversion")
    client = container  # the emulator's own client is a ContainerClient too
    unlisted = ["train-00007-of-00008"]
    assert staging.verify(client, "", files) == ([deleted], [corrupt], unlisted, 0)
    assert staging.verify(client, "", files, download=True)[1:] == (
        [corrupt, disguised],
        unlisted,
        1,  # the blobs whose properties match are read back
    )
    assert staging.verify(client, "", files, sample=5).different == [corrupt, disguised]

    # A rerun repairs what it can see; reading blobs back still finds the disguised one.
    capsys.readouterr()
    assert main(args) == 1
    captured = capsys.readouterr()
    assert disguised not in captured.err and "0 read back" in captured.out
    assert "note: a blob over 32 MiB is checked by size and by the Content-MD5" in captured.out
    for check in (["--download-verify"], ["--verify-sample", "4"]):
        assert main([*args, *check]) == 1
        captured = capsys.readouterr()
        assert f"different from the manifest: {disguised}" in captured.err
        assert "4 read back" in captured.out and "note:" not in captured.out
    assert "not in the manifest (training would read it too): train-00007-of-00008" in captured.err
    assert corrupt not in captured.err and deleted not in captured.err
    assert staging.verify(client, "", files)[:2] == ([], [])


def test_wrong_credentials_are_a_clear_error(
    tmp_path, azurite, container, monkeypatch, capsys, make_dataset
):
    make_dataset(tmp_path, [1000])
    wrong_key = base64.b64encode(b"not the account key" * 4).decode()
    monkeypatch.setenv(staging.CONNECTION_STRING_ENV, azurite.connection_string(wrong_key))
    rc = main(["data", "stage", str(tmp_path), "--container", container.container_name])
    assert rc == 2
    err = capsys.readouterr().err
    assert "refused access" in err and "wrong credentials" in err
    assert list(container.list_blobs()) == []


def test_missing_container_is_a_clear_error(tmp_path, emulator_env, capsys, make_dataset):
    make_dataset(tmp_path, [1000])
    rc = main(["data", "stage", str(tmp_path), "--container", "no-such-container"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "container 'no-such-container'" in err and "does not exist" in err


def test_a_local_file_changed_since_prepare_is_not_uploaded(
    tmp_path, container, emulator_env, capsys, make_dataset
):
    manifest = make_dataset(tmp_path, [1000, 1000])
    (tmp_path / manifest.shards[1].name).write_bytes(b"edited after the manifest was written")
    assert main(["data", "stage", str(tmp_path), "--container", container.container_name]) == 1
    err = capsys.readouterr().err
    assert f"failed: {manifest.shards[1].name}: the local file differs from the manifest" in err
    assert f"missing: {manifest.shards[1].name}" in err
    names = {b.name for b in container.list_blobs()}
    assert names == {manifest.shards[0].name}  # and no manifest blob: the set is incomplete


def test_upload_errors_of_any_kind_are_listed_and_the_rest_still_verified(
    tmp_path, container, emulator_env, capsys, make_dataset, monkeypatch
):
    manifest = make_dataset(tmp_path, [1000, 1000, 1000], seed=3)
    lost, unreadable, fine = (s.name for s in manifest.shards)
    original = ContainerClient.upload_blob

    def upload_blob(self, name, data, *args, **kwargs):
        if name == lost:
            raise ServiceResponseError("Connection aborted by the peer")
        if name == unreadable:
            raise OSError(5, "Input/output error")
        return original(self, name, data, *args, **kwargs)

    monkeypatch.setattr(ContainerClient, "upload_blob", upload_blob)
    assert main(["data", "stage", str(tmp_path), "--container", container.container_name]) == 1
    captured = capsys.readouterr()
    assert f"failed: {lost}: ServiceResponseError: Connection aborted by the peer" in captured.err
    assert f"failed: {unreadable}: OSError: [Errno 5] Input/output error" in captured.err
    assert f"missing: {lost}" in captured.err and f"missing: {unreadable}" in captured.err
    assert "1 missing" not in captured.out and "3 missing" in captured.out  # + the manifest
    assert {b.name for b in container.list_blobs()} == {fine}


def test_a_changed_dataset_never_leaves_the_old_manifest_beside_new_shards(
    tmp_path, container, emulator_env, capsys, make_dataset
):
    old, new = tmp_path / "old", tmp_path / "new"
    make_dataset(old, [1000, 1000, 1000], seed=4)
    manifest = make_dataset(new, [1000, 1000, 1000], seed=5)  # same names, other bytes
    args = ["--container", container.container_name, "--prefix", "imagenet"]
    assert main(["data", "stage", str(old), *args]) == 0
    # the new conversion's last shard is edited locally: its upload fails midway through
    (new / manifest.shards[2].name).write_bytes(os.urandom(1000))
    assert main(["data", "stage", str(new), *args]) == 1
    names = {b.name for b in container.list_blobs()}
    assert "imagenet/manifest.json" not in names
    assert names == {f"imagenet/{s.name}" for s in manifest.shards}  # a mix: 2 new, 1 old

    capsys.readouterr()
    make_dataset(new, [1000, 1000, 1000], seed=5)
    assert main(["data", "stage", str(new), *args]) == 0
    blob = container.download_blob("imagenet/manifest.json").readall()
    assert blob == (new / "manifest.json").read_bytes()


def test_each_file_is_read_once_and_a_block_upload_stops_before_wrong_bytes_land(
    tmp_path, container, emulator_env, capsys, make_dataset, monkeypatch
):
    manifest = make_dataset(tmp_path, [33 * MB, 2000], seed=6)
    read = Counter()
    real_open = builtins.open

    class Counting:
        def __init__(self, f, name):
            self.f, self.name = f, name

        def read(self, *size):
            data = self.f.read(*size)
            read[self.name] += len(data)
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def counting_open(path, mode="r", *args, **kwargs):
        return Counting(real_open(path, mode, *args, **kwargs), os.path.basename(path))

    monkeypatch.setattr(staging, "open", counting_open, raising=False)
    args = ["data", "stage", str(tmp_path), "--container", container.container_name]
    assert main(args) == 0
    assert {name: read[name] for name in read if name != "manifest.json"} == {
        s.name: s.size for s in manifest.shards
    }

    # Same size, other bytes, in a file that goes up as blocks: found as the upload reads it,
    # and the blob is never committed.
    big = tmp_path / manifest.shards[0].name
    data = bytearray(big.read_bytes())
    data[-1] ^= 0xFF
    big.write_bytes(bytes(data))
    container.delete_blob(big.name)
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"failed: {big.name}: the local file differs from the manifest" in err
    assert big.name not in {b.name for b in container.list_blobs()}
