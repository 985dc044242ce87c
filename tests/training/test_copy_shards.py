"""The node-side copy step with local folders standing in for the mount and the local disk."""

import json
import os
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest

from azdl.envs import PACKAGES_ROOT, training_env
from training.data import copy_shards
from training.data.copy_shards import (
    Launch,
    job_from_env,
    launch_from_env,
    link_others,
    plan_shards,
    run_copy_all,
    run_node_copy,
)
from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary, file_digests
from training.data.shards import list_shards, shards_for_rank
from training.errors import TrainingError

QUIET = lambda _: None  # noqa: E731


def _mount(folder: Path, train: int = 10, validation: int = 4, manifest: bool = True) -> Path:
    """Shard-named files of random bytes, with a manifest of their sizes and digests."""
    folder.mkdir(parents=True)
    entries = []
    for split, total in (("train", train), ("validation", validation)):
        for i in range(total):
            path = folder / f"{split}-{i:05d}-of-{total:05d}"
            path.write_bytes(os.urandom(1000 + i))
            entries.append(ShardEntry(path.name, split, 1, *file_digests(path)))
    if manifest:
        splits = {
            s: SplitSummary(n, n, {"n1": n})
            for s, n in (("train", train), ("validation", validation))
        }
        Manifest({"n1": 0}, splits, entries).write(folder)
    return folder


def test_each_node_copies_exactly_what_its_ranks_read(tmp_path):
    mount = _mount(tmp_path / "mount")
    size, per_node = 4, 2
    nodes = [
        [Launch(r, size, r % per_node, per_node) for r in range(n * 2, n * 2 + 2)] for n in range(2)
    ]
    copied = []
    for n, ranks in enumerate(nodes):
        files, others = plan_shards(mount, ["train", "validation"], ranks[0])
        expected = set()
        for split in ("train", "validation"):
            for launch in ranks:
                expected |= set(shards_for_rank(list_shards(mount, split), launch.rank, size))
        assert {str(f) for f in files} == expected
        copied.append({f.name for f in files})

        dest = tmp_path / f"nvme{n}"
        run_node_copy(mount, dest, ["train", "validation"], ranks[0], timeout=5, log=lambda _: None)
        for launch in ranks:
            # Training reads --dest exactly as it would read the mount, by global rank, and
            # every shard it opens is a local copy.
            for split in ("train", "validation"):
                local = shards_for_rank(list_shards(dest, split), launch.rank, size)
                remote = shards_for_rank(list_shards(mount, split), launch.rank, size)
                assert [Path(p).name for p in local] == [Path(p).name for p in remote]
                for p in map(Path, local):
                    assert not p.is_symlink() and p.read_bytes() == (mount / p.name).read_bytes()
        links = {p.name for p in dest.iterdir() if p.is_symlink()}
        assert links == {f.name for f in others}
        assert (dest / "manifest.json").is_file()
    assert copied[0].isdisjoint(copied[1])
    assert copied[0] | copied[1] == {p.name for p in mount.iterdir()} - {"manifest.json"}


def test_local_rank_zero_copies_while_the_other_waits(tmp_path):
    mount, dest = _mount(tmp_path / "mount"), tmp_path / "nvme"
    env = training_env(
        {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "AZUREML_RUN_ID": "r1"}
    )
    cmd = [
        sys.executable,
        "-m",
        "training.data.copy_shards",
        "--source",
        str(mount),
        "--dest",
        str(dest),
        "--timeout",
        "60",
    ]

    def start(rank: int) -> subprocess.Popen:
        rank_env = {
            **env,
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank - 2),
        }
        return subprocess.Popen(
            cmd,
            env=rank_env,
            cwd=PACKAGES_ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    waiter = start(3)  # the second rank of node 1 starts first and must wait
    copier = start(2)
    copier_out, _ = copier.communicate(timeout=60)
    waiter_out, _ = waiter.communicate(timeout=60)
    assert copier.returncode == 0, copier_out
    assert waiter.returncode == 0, waiter_out
    assert "waiting for local rank 0" in waiter_out
    # ranks 2 and 3 of 4 read train 2, 6 and 3, 7, and validation 2 and 3
    assert "[copy_shards rank 2] copying 6 shard(s)" in copier_out
    assert "shards, 0.00/0.00 GB" in copier_out  # the progress line
    names = sorted(p.name for p in dest.iterdir() if not (p.name[0] == "." or p.is_symlink()))
    assert names == [
        "manifest.json",
        "train-00002-of-00010",
        "train-00003-of-00010",
        "train-00006-of-00010",
        "train-00007-of-00010",
        "validation-00002-of-00004",
        "validation-00003-of-00004",
    ]


def test_not_enough_local_disk_is_refused_before_copying(tmp_path, monkeypatch):
    mount, dest = _mount(tmp_path / "mount"), tmp_path / "nvme"
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(
        copy_shards.shutil, "disk_usage", lambda _: usage(10**6, 10**6 - 5000, 5000)
    )
    with pytest.raises(TrainingError, match=r"not enough free space in .*nvme: 10 shard\(s\) need"):
        run_node_copy(mount, dest, ["train"], Launch(), timeout=5, log=lambda _: None)
    assert [p.name for p in dest.iterdir()] == [copy_shards.FAILED_MARKER]


def test_a_rerun_skips_complete_copies_and_replaces_partial_ones(tmp_path):
    mount, dest = _mount(tmp_path / "mount", train=3, validation=0), tmp_path / "nvme"
    lines = []
    run_node_copy(mount, dest, ["train"], Launch(), timeout=5, log=lines.append)
    (dest / "train-00001-of-00003").write_bytes(b"torn")  # a copy cut short
    (dest / "train-00002-of-00003").unlink()  # a link left by a run with another rank layout
    (dest / "train-00002-of-00003").symlink_to(mount / "train-00002-of-00003")
    lines.clear()
    run_node_copy(mount, dest, ["train"], Launch(), timeout=5, log=lines.append)
    assert "copying 2 shard(s)" in lines[0] and "(1 already there)" in lines[0]
    assert not (dest / "train-00002-of-00003").is_symlink()
    assert (dest / "train-00001-of-00003").read_bytes() == (
        mount / "train-00001-of-00003"
    ).read_bytes()


def test_launch_comes_from_the_mpi_environment():
    assert launch_from_env({}) == Launch(0, 1, 0, 1)
    env = {
        "OMPI_COMM_WORLD_RANK": "5",
        "OMPI_COMM_WORLD_SIZE": "8",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
    }
    assert launch_from_env(env).node_ranks == range(4, 8)
    horovod = {
        "HOROVOD_RANK": "1",
        "HOROVOD_SIZE": "2",
        "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2",
    }
    assert launch_from_env(horovod) == Launch(1, 2, 1, 2)
    with pytest.raises(TrainingError, match="inconsistent"):
        launch_from_env({**env, "OMPI_COMM_WORLD_LOCAL_RANK": "4"})
    with pytest.raises(TrainingError, match="non-integer"):
        launch_from_env({**env, "OMPI_COMM_WORLD_SIZE": "eight"})


def test_ranks_without_a_validation_shard_copy_none_and_training_sees_the_split(tmp_path):
    mount = _mount(tmp_path / "mount", train=4, validation=2)
    size, per_node = 4, 2
    for node in range(2):
        dest = tmp_path / f"nvme{node}"
        first = Launch(node * per_node, size, 0, per_node)
        run_node_copy(mount, dest, ["train", "validation"], first, timeout=5, log=QUIET)
        for rank in first.node_ranks:
            # what the training pipeline opens: its train shards and validation[rank::size]
            train = shards_for_rank(list_shards(dest, "train"), rank, size)
            validation = list_shards(dest, "validation")[rank::size]
            assert [Path(p).name for p in train] == [f"train-{rank:05d}-of-00004"]
            assert len(validation) == (1 if rank < 2 else 0)
            for p in map(Path, train + validation):
                assert not p.is_symlink() and p.read_bytes() == (mount / p.name).read_bytes()
        # ranks 2 and 3 read no validation shard: both are links to the mount there
        links = sorted(p.name for p in dest.iterdir() if p.is_symlink())
        assert [n for n in links if n.startswith("validation")] == (
            [] if node == 0 else ["validation-00000-of-00002", "validation-00001-of-00002"]
        )


def _wait_in_thread(mount, dest, job, timeout=10.0):
    """Local rank 1 of a 2-rank node, waiting in a thread; returns (thread, outcome list)."""
    outcome = []

    def wait():
        try:
            launch = Launch(1, 2, 1, 2)
            run_node_copy(mount, dest, ["train"], launch, timeout, log=QUIET, job=job)
            outcome.append("ok")
        except TrainingError as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, outcome


def test_a_failure_mark_left_by_an_earlier_job_does_not_stop_the_next(tmp_path, monkeypatch):
    mount, dest = _mount(tmp_path / "mount", train=4, validation=0), tmp_path / "nvme"
    usage = namedtuple("usage", "total used free")
    with monkeypatch.context() as m:
        m.setattr(copy_shards.shutil, "disk_usage", lambda _: usage(10**6, 10**6, 0))
        with pytest.raises(TrainingError, match="not enough free space"):
            run_node_copy(mount, dest, ["train"], Launch(0, 2, 0, 2), 5, QUIET, job="job-1")
    assert (dest / copy_shards.FAILED_MARKER).is_file()

    # job 2's second rank starts first and finds job 1's failure mark: it must keep waiting
    thread, outcome = _wait_in_thread(mount, dest, "job-2")
    time.sleep(1.0)
    assert thread.is_alive() and outcome == []
    run_node_copy(mount, dest, ["train"], Launch(0, 2, 0, 2), 5, QUIET, job="job-2")
    thread.join()
    assert outcome == ["ok"]


def test_a_done_mark_left_by_an_earlier_job_is_not_taken_for_this_one(tmp_path):
    mount, dest = _mount(tmp_path / "mount", train=4, validation=0), tmp_path / "nvme"
    run_node_copy(mount, dest, ["train"], Launch(0, 2, 0, 2), 5, QUIET, job="job-1")
    # job 2's second rank must wait for job 2's local rank 0, which never comes here
    with pytest.raises(TrainingError, match="did not finish copying"):
        run_node_copy(mount, dest, ["train"], Launch(1, 2, 1, 2), 1.5, QUIET, job="job-2")
    # without a job identity, a mark counts only if it is recent
    marker = dest / copy_shards.DONE_MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "job": None}))
    run_node_copy(mount, dest, ["train"], Launch(1, 2, 1, 2), 1.5, QUIET, job=None)
    an_hour_ago = time.time() - 3600
    os.utime(marker, (an_hour_ago, an_hour_ago))
    with pytest.raises(TrainingError, match="did not finish copying"):
        run_node_copy(mount, dest, ["train"], Launch(1, 2, 1, 2), 1.5, QUIET, job=None)


def test_job_identity_comes_from_azure_ml_or_open_mpi():
    assert job_from_env({}) is None
    assert job_from_env({"OMPI_MCA_orte_ess_jobid": "3236233217"}) == (
        "OMPI_MCA_orte_ess_jobid=3236233217"
    )
    both = {"AZUREML_RUN_ID": "calm_fig_1", "PMIX_NAMESPACE": "prterun-x-1@1"}
    assert job_from_env(both) == "AZUREML_RUN_ID=calm_fig_1"


def test_links_replace_old_entries_without_a_moment_where_the_shard_is_missing(
    tmp_path, monkeypatch
):
    mount = _mount(tmp_path / "mount", train=3, validation=0)
    dest = tmp_path / "nvme"
    dest.mkdir()
    others = [mount / "train-00000-of-00003", mount / "train-00001-of-00003"]
    (dest / others[0].name).write_bytes(b"an old local copy")
    (dest / others[1].name).symlink_to(tmp_path / "an-old-mount" / others[1].name)
    original = Path.symlink_to

    def symlink_to(self, target):
        for shard in others:  # what a rank listing dest meanwhile would see
            assert os.path.lexists(dest / shard.name), f"{shard.name} missing during relinking"
        original(self, target)

    monkeypatch.setattr(Path, "symlink_to", symlink_to)
    link_others(others, dest)
    for shard in others:
        assert (dest / shard.name).is_symlink()
        assert (dest / shard.name).read_bytes() == shard.read_bytes()


def test_shards_of_an_earlier_conversion_are_removed_and_copies_checked_by_md5(tmp_path):
    mount, dest = _mount(tmp_path / "mount", train=4, validation=2), tmp_path / "nvme"
    dest.mkdir()
    (dest / "train-00000-of-01024").write_bytes(b"from the full ImageNet conversion")
    (dest / "validation-00127-of-00128").symlink_to(tmp_path / "old-mount" / "v")
    (dest / "notes.txt").write_text("not a shard: left alone")
    # a copy of the right size but other bytes (an earlier dataset with the same shard names)
    same_size = bytearray((mount / "train-00000-of-00004").read_bytes())
    same_size[0] ^= 0xFF
    (dest / "train-00000-of-00004").write_bytes(bytes(same_size))
    lines = []
    run_node_copy(mount, dest, ["train", "validation"], Launch(), timeout=5, log=lines.append)

    assert any("removed 2 shard(s)" in line for line in lines), lines
    assert [Path(p).name for p in list_shards(dest, "train")] == [
        f"train-{i:05d}-of-00004" for i in range(4)
    ]
    assert len(list_shards(dest, "validation")) == 2
    assert (dest / "notes.txt").is_file()
    assert "copying 6 shard(s)" in lines[1] and "(0 already there)" in lines[1]
    for p in list_shards(dest, "train"):
        assert Path(p).read_bytes() == (mount / Path(p).name).read_bytes()


def test_a_source_that_mixes_conversions_or_differs_from_its_manifest_is_refused(tmp_path):
    mount, dest = _mount(tmp_path / "mount", train=4, validation=0), tmp_path / "nvme"
    stale = mount / "train-00000-of-01024"
    stale.write_bytes(b"left over")
    with pytest.raises(TrainingError, match=r"mixes train shards of 2 conversions \(-of-00004"):
        run_node_copy(mount, dest, ["train"], Launch(), timeout=5, log=QUIET)
    stale.unlink()
    shard = mount / "train-00002-of-00004"
    shard.write_bytes(os.urandom(shard.stat().st_size))  # same size, other bytes
    with pytest.raises(TrainingError, match="train-00002-of-00004 does not match the MD5"):
        run_node_copy(mount, dest, ["train"], Launch(), timeout=5, log=QUIET)
    assert not (dest / shard.name).exists()


def test_copy_all_fills_a_share_verified_and_resumes(tmp_path):
    mount, share = _mount(tmp_path / "blob", train=6, validation=2), tmp_path / "nfs" / "imagenet"
    share.mkdir(parents=True)
    (share / "manifest.json").write_text('{"schema": "an older conversion"}')
    (share / "train-00000-of-01024").write_bytes(b"older conversion")
    bad = mount / "train-00003-of-00006"
    good = bad.read_bytes()
    bad.write_bytes(os.urandom(len(good)))

    with pytest.raises(TrainingError, match="train-00003-of-00006 does not match the MD5"):
        run_copy_all(mount, share, log=QUIET)
    # the old manifest and the old conversion's shards are gone before any new shard lands
    names = {p.name for p in share.iterdir() if not p.name.startswith(".")}
    assert "manifest.json" not in names and "train-00000-of-01024" not in names
    assert names == {f"train-{i:05d}-of-00006" for i in range(3)}

    bad.write_bytes(good)
    lines = []
    run_copy_all(mount, share, log=lines.append)
    assert "copying 5 shard(s)" in lines[0] and "(3 already there)" in lines[0]
    assert "8 shard(s)" in lines[-1] and "verified" in lines[-1]
    assert sorted(p.name for p in share.iterdir()) == sorted(p.name for p in mount.iterdir())
    for p in mount.iterdir():
        assert (share / p.name).read_bytes() == p.read_bytes()

    lines.clear()
    before = {p.name: p.stat().st_mtime_ns for p in share.iterdir()}
    run_copy_all(mount, share, log=lines.append)
    assert "copying 0 shard(s)" in lines[0]
    assert {p.name: p.stat().st_mtime_ns for p in share.iterdir()} == before


def test_copy_all_needs_a_manifest_and_room(tmp_path, monkeypatch):
    bare = _mount(tmp_path / "bare", train=2, validation=0, manifest=False)
    with pytest.raises(TrainingError, match="no manifest at"):
        run_copy_all(bare, tmp_path / "share", log=QUIET)
    mount = _mount(tmp_path / "blob", train=2, validation=0)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(copy_shards.shutil, "disk_usage", lambda _: usage(10**6, 10**6, 100))
    with pytest.raises(TrainingError, match=r"not enough free space in .*share: 2 shard\(s\)"):
        run_copy_all(mount, tmp_path / "share", log=QUIET)


def test_copy_all_command_line(tmp_path):
    mount, share = _mount(tmp_path / "blob", train=3, validation=1), tmp_path / "nfs"
    cmd = [sys.executable, "-m", "training.data.copy_shards", "--all"]
    cmd += ["--source", str(mount), "--dest", str(share)]
    env = training_env()
    for name in [*copy_shards.JOB_ID_ENV, "OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK"]:
        env.pop(name, None)
    done = subprocess.run(cmd, env=env, cwd=PACKAGES_ROOT, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert "[copy_shards rank 0] copying 4 shard(s)" in done.stdout
    assert sorted(p.name for p in share.iterdir()) == sorted(p.name for p in mount.iterdir())

    mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}
    mpi |= {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    done = subprocess.run(
        cmd, env={**env, **mpi}, cwd=PACKAGES_ROOT, text=True, capture_output=True
    )
    assert done.returncode == 2 and "--all runs as one process" in done.stderr
