"""The node-side copy step with local folders standing in for the mount and the local disk."""

import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from azdl.envs import REPO_ROOT, training_env
from training import copy_shards
from training.copy_shards import Launch, launch_from_env, plan_shards, run_node_copy
from training.errors import TrainingError
from training.shards import list_shards, shards_for_rank


def _mount(folder: Path, train: int = 10, validation: int = 4) -> Path:
    folder.mkdir(parents=True)
    for split, total in (("train", train), ("validation", validation)):
        for i in range(total):
            (folder / f"{split}-{i:05d}-of-{total:05d}").write_bytes(os.urandom(1000 + i))
    (folder / "manifest.json").write_text("{}")
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
    env = training_env({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    cmd = [
        sys.executable,
        "-m",
        "training.copy_shards",
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
            cwd=REPO_ROOT,
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
