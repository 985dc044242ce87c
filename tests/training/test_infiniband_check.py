"""InfiniBand verified, not assumed: NCCL's own initialisation log, as posted in public threads
(tests/training/nccl_logs/, each file cites its source), read by training.nccl_check, and the
guard stopping a rank whose NCCL fell back to sockets."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from azdl.envs import REPO_ROOT
from training.nccl_check import NcclCheck

LOGS = Path(__file__).parent / "nccl_logs"


def log_lines(name: str) -> list[str]:
    return [line for line in (LOGS / name).read_text().splitlines() if not line.startswith("#")]


def check(name: str, multi_node: bool = True):
    """The verdict on a log, and how many lines it took to reach it."""
    nccl = NcclCheck(multi_node=multi_node)
    lines = log_lines(name)
    for index, line in enumerate(lines, 1):
        if nccl.feed(line) is not None:
            return nccl.verdict, index
    return nccl.finish(), len(lines)


def test_infiniband_with_gpudirect_rdma_on_azure_nd_passes():
    verdict, _ = check("ib_gdr_azure_aks.log")
    assert verdict.ok, verdict.message
    assert verdict.network == "IB" and verdict.gdr_channels == 6 and verdict.host_channels == 0


def test_a_fallback_to_sockets_fails_at_the_line_that_says_so():
    verdict, at = check("socket_azureml.log")
    assert not verdict.ok and verdict.network == "Socket"
    assert at == len(log_lines("socket_azureml.log"))  # "Using network Socket": no waiting
    assert verdict.message == (
        "NCCL fell back to TCP sockets (NET/Socket) instead of InfiniBand: it found no "
        "InfiniBand device (NET/IB : No device found)"
    )


def test_infiniband_through_host_memory_fails_when_the_communicator_is_complete():
    verdict, at = check("ib_host_memory.log")
    assert not verdict.ok and verdict.network == "IB" and verdict.host_channels == 4
    assert "Init COMPLETE" in log_lines("ib_host_memory.log")[at - 1]
    assert "without GPUDirect RDMA (4 inter-node channels through host memory" in verdict.message


def test_gpudirect_rdma_disabled_for_the_hcas_fails_naming_them():
    verdict, _ = check("ib_gdr_disabled.log")
    assert not verdict.ok and verdict.network == "IB"
    assert "GPU Direct RDMA disabled for mlx5_0, mlx5_1" in verdict.message


def test_a_single_node_needs_the_fabric_but_not_gpudirect_rdma():
    assert check("ib_gdr_disabled.log", multi_node=False)[0].ok
    assert not check("socket_azureml.log", multi_node=False)[0].ok


def test_a_log_without_nccl_info_is_not_a_pass():
    nccl = NcclCheck(multi_node=True)
    nccl.feed("NCCL version 2.21.5+cuda12.4")
    verdict = nccl.finish()
    assert not verdict.ok and "never said which network" in verdict.message


def fake_rank(log: str, then: str) -> list[str]:
    """A command that prints a log's lines as NCCL would, then runs `then` (Python)."""
    lines = log_lines(log)
    return [
        sys.executable,
        "-c",
        f"import sys, time\nprint(*{lines!r}, sep='\\n', flush=True)\n{then}",
    ]


def guard(tmp_path, nodes: int, command: list[str], nccl_debug="WARN"):
    argv = [sys.executable, "-m", "training.guard", "--ranks-dir", str(tmp_path),
            "--check-infiniband", "--nodes", str(nodes), "--nccl-debug", nccl_debug,
            "--"]  # fmt: skip
    env = os.environ | {"OMPI_COMM_WORLD_RANK": "5", "PYTHONPATH": str(REPO_ROOT)}
    started = time.monotonic()
    run = subprocess.run([*argv, *command], env=env, capture_output=True, text=True, timeout=60)
    return run, time.monotonic() - started


def test_the_guard_stops_a_multi_node_rank_that_fell_back_to_sockets(tmp_path):
    run, took = guard(tmp_path, 2, fake_rank("socket_azureml.log", "time.sleep(50)"))
    assert run.returncode == 3, run.stderr
    assert took < 20  # stopped, not waited out
    host = os.uname().nodename
    assert f"azdl: InfiniBand check FAILED on rank 5 on {host}: NCCL fell back to TCP" in run.stderr


def test_on_one_node_the_guard_warns_and_the_run_goes_on(tmp_path):
    run, _ = guard(tmp_path, 1, fake_rank("socket_azureml.log", "sys.exit(0)"))
    assert run.returncode == 0, run.stderr
    assert "warning: InfiniBand check on rank 5" in run.stderr


@pytest.mark.parametrize(("level", "kept"), [("WARN", False), ("INFO", True)])
def test_after_the_check_nccl_info_goes_back_to_the_users_level(tmp_path, level, kept):
    later = "print('h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read')\n" + (
        "print('h:1:2 [0] NCCL WARN Cuda failure')"
    )
    lines = log_lines("ib_host_memory.log")  # ends with Init COMPLETE: the verdict
    command = [sys.executable, "-c", f"print(*{lines!r}, sep='\\n', flush=True)\n{later}"]
    run, _ = guard(tmp_path, 1, command, nccl_debug=level)
    assert run.returncode == 0, run.stderr
    assert "Init COMPLETE" in run.stdout  # the check's own evidence stays in the log
    assert ("via P2P/CUMEM/read" in run.stdout) == kept
    assert "NCCL WARN Cuda failure" in run.stdout
