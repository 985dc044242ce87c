"""A stop that every restart would repeat reaches every node (training.job_stop): a node writes
it into the job's folder, and each node's torchrun, run under `job_stop run`, ends when one
appears; and a node's address as the others reach it (training.node_address)."""

import subprocess
import sys
import time

import pytest

from azdl.envs import PACKAGES_ROOT
from training import job_stop, node_address


def test_the_earliest_stop_is_the_one_reported(tmp_path):
    assert job_stop.first_stop(tmp_path / "stops") is None
    job_stop.write(tmp_path / "stops", 1, "its health gate failed")
    stop = job_stop.first_stop(tmp_path / "stops")
    assert (stop["exit"], stop["why"]) == (1, "its health gate failed")


@pytest.mark.slow
def test_a_stop_ends_the_command_within_the_poll(tmp_path):
    stops = tmp_path / "stops"
    argv = [sys.executable, "-m", "training.job_stop", "run", str(stops), "--", "sleep", "60"]
    process = subprocess.Popen(argv, cwd=PACKAGES_ROOT, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    job_stop.write(stops, 3, "InfiniBand check FAILED on rank 1 on node-1")
    written = time.monotonic()
    _, err = process.communicate(timeout=30)
    assert process.returncode == 3
    assert time.monotonic() - written < job_stop.POLL_S + 2
    assert "stopped the job: InfiniBand check FAILED on rank 1 on node-1; ending this node's" in err


@pytest.mark.slow
def test_a_command_that_ends_by_itself_gives_its_own_status(tmp_path):
    argv = [sys.executable, "-m", "training.job_stop", "run", str(tmp_path), "--", "sh", "-c",
            "exit 7"]  # fmt: skip
    assert subprocess.run(argv, cwd=PACKAGES_ROOT, check=False).returncode == 7


def test_outside_a_jobs_torchrun_nothing_is_closed(monkeypatch):
    monkeypatch.delenv(job_stop.RENDEZVOUS_ENV, raising=False)
    assert job_stop.close_rendezvous("why") is False  # torch is not even imported


def test_a_nodes_address_is_its_route_to_node_0():
    assert node_address.address("127.0.0.1", 29500) == "127.0.0.1"


def test_without_master_addr_the_address_step_says_what_is_missing(monkeypatch, capsys):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert node_address.main() == 2
    assert capsys.readouterr().err == (
        "error: MASTER_ADDR not set: this node cannot tell its address to the others (Azure ML "
        "sets both on every node of a distribution: pytorch job)\n"
    )
