"""InfiniBand verified, not assumed: whole NCCL logs of one rank in NCCL's own order
(tests/training/nccl_logs/, README.md there says where each comes from) read by
training.nccl_check, and the guard stopping a real rank process whose NCCL runs without GPUDirect
RDMA, on TCP, or with an HCA missing."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from azdl.envs import PACKAGES_ROOT
from azdl.jobs.retry import classify
from training.nccl_check import NcclCheck

LOGS = Path(__file__).parent / "nccl_logs"
ND_H100_V5_HCAS = 8  # infra/vm_sizes.yaml (Azure/azurehpc-health-checks nd96isr_h100_v5.conf)


def log_lines(name: str) -> list[str]:
    return [line for line in (LOGS / name).read_text().splitlines() if not line.startswith("#")]


def check(name: str, multi_node: bool = True, hcas: int | None = ND_H100_V5_HCAS):
    """The verdict on a whole log, and the line that decided it (None: the log's end)."""
    nccl = NcclCheck(multi_node=multi_node, expected_hcas=hcas)
    for line in log_lines(name):
        if nccl.feed(line) is not None:
            return nccl.verdict, line
    return nccl.finish(), None


@pytest.mark.parametrize("plugin", ["ib", "ibext_v8"])
def test_gpudirect_rdma_passes_at_the_first_channel_after_init_complete(plugin):
    verdict, at = check(f"composed_{plugin}_gdr.log")
    assert verdict.ok, verdict.message
    assert verdict.network == ("IB" if plugin == "ib" else "IBext_v8")
    assert "[receive] via NET/" in at and at.endswith("/GDRDMA")  # NCCL >= 2.22: after init
    lines = log_lines(f"composed_{plugin}_gdr.log")
    complete = next(i for i, line in enumerate(lines) if "Init COMPLETE" in line)
    assert lines.index(at) > complete


def test_at_init_complete_the_check_waits_for_the_first_channel_across_nodes():
    nccl = NcclCheck(multi_node=True, expected_hcas=ND_H100_V5_HCAS)
    for line in log_lines("composed_ibext_v8_gdr.log"):
        assert nccl.feed(line) is None
        if "Init COMPLETE" in line:
            break
    assert nccl.waiting_for_channel


@pytest.mark.parametrize("plugin", ["ib", "ibext_v8"])
def test_no_gpudirect_rdma_stops_the_rank_at_init_complete_under_either_plugin_name(plugin):
    verdict, at = check(f"composed_{plugin}_no_gdr.log")
    assert not verdict.ok and "Init COMPLETE" in at
    name = "IB" if plugin == "ib" else "IBext_v8"
    hcas = ", ".join(f"mlx5_ib{i}" for i in range(8))
    assert verdict.message == (
        f"NCCL uses {name} without GPUDirect RDMA: NET/{name} : GPU Direct RDMA Disabled for "
        f"{hcas} (is the nvidia-peermem module loaded on the node?)"
    )


@pytest.mark.parametrize("plugin", ["ib", "ibext_v8"])
def test_a_missing_hca_stops_the_rank_at_init_complete(plugin):
    verdict, at = check(f"composed_{plugin}_missing_hca.log")
    assert not verdict.ok and "Init COMPLETE" in at
    assert verdict.message.startswith(
        "NCCL found 7 InfiniBand HCAs (mlx5_ib0, mlx5_ib1, mlx5_ib2, mlx5_ib3, mlx5_ib4, "
        "mlx5_ib6, mlx5_ib7); the VM size has 8"
    )  # mlx5_an0, the accelerated-networking NIC NCCL lists as RoCE, is not counted
    assert check(f"composed_{plugin}_missing_hca.log", hcas=None)[0].ok  # sizes without a count


@pytest.mark.parametrize("plugin", ["ib", "ibext_v8"])
def test_a_fallback_to_sockets_fails_at_the_line_that_says_so(plugin):
    verdict, at = check(f"composed_{plugin}_socket.log")
    assert not verdict.ok and verdict.network == "Socket"
    assert at.endswith("NCCL INFO Using network Socket")
    assert verdict.message == (
        "NCCL fell back to TCP sockets (NET/Socket) instead of InfiniBand: it found no "
        "InfiniBand device (NET/IB : No device found)"
    )


def test_real_logs_connect_at_init_and_fall_back_to_sockets_the_same_way():
    # NCCL_CUMEM_ENABLE=0 turns runtime connection off: channels come before Init COMPLETE.
    verdict, at = check("real_2.27.5_ib_roce_gdr_connect_at_init.log", hcas=None)
    assert verdict.ok and verdict.gdr_channels == 8 and "Init COMPLETE" in at, verdict.message
    verdict, at = check("real_2.27.5_socket_single_node.log", multi_node=False, hcas=None)
    assert not verdict.ok and at.endswith("Using network Socket")


def test_the_wait_for_a_channel_ends_at_its_deadline_on_the_init_time_evidence():
    nccl = NcclCheck(multi_node=True, expected_hcas=ND_H100_V5_HCAS)
    lines = log_lines("composed_ib_gdr.log")
    for line in lines[: next(i for i, x in enumerate(lines) if "Init COMPLETE" in x) + 1]:
        nccl.feed(line)
    verdict = nccl.at_deadline(120)
    assert verdict.ok and "GPU Direct RDMA Enabled for 9 HCAs at init" in verdict.message
    assert "no channel of this rank crossed nodes within 120 s" in verdict.message
    # Without NCCL's NET lines there is nothing to go on: not verified is not a pass.
    blind = NcclCheck(multi_node=True)
    for line in lines:
        if "GPU Direct RDMA" not in line and "Channel" not in line:
            blind.feed(line)
    assert not blind.at_deadline(120).ok
    assert "GPUDirect RDMA could not be verified" in blind.verdict.message


def test_a_single_node_needs_the_fabric_but_not_gpudirect_rdma():
    assert check("composed_ibext_v8_no_gdr.log", multi_node=False)[0].ok
    assert not check("composed_ib_socket.log", multi_node=False)[0].ok


def test_a_log_without_nccl_info_is_not_a_pass():
    nccl = NcclCheck(multi_node=True)
    nccl.feed("NCCL version 2.27.5+cuda12.9")
    verdict = nccl.finish()
    assert not verdict.ok and "never said which network" in verdict.message


def test_the_committed_composed_logs_are_what_compose_py_writes():
    sys.path.insert(0, str(LOGS))
    try:
        import compose
    finally:
        sys.path.remove(str(LOGS))
    for name in compose.FIXTURES:
        assert (LOGS / name).read_text() == compose.render(name), name


def rank_printing(log: str, until: str | None = None, then: str = "") -> list[str]:
    """A process that prints a log's lines as NCCL does (its stdout, flushed per line), up to
    the first line containing `until` if given, then runs `then` (Python)."""
    lines = log_lines(log)
    if until is not None:
        lines = lines[: next(i for i, x in enumerate(lines) if until in x) + 1]
    code = f"import sys, time\nprint(*{lines!r}, sep='\\n', flush=True)\n{then}"
    return [sys.executable, "-c", code]


def guard(tmp_path, nodes: int, command: list[str], *options: str):
    argv = [sys.executable, "-m", "training.guard", "--ranks-dir", str(tmp_path),
            "--check-infiniband", "--nodes", str(nodes), "--hcas", "8", *options,
            "--"]  # fmt: skip
    env = os.environ | {"OMPI_COMM_WORLD_RANK": "5", "PYTHONPATH": str(PACKAGES_ROOT)}
    started = time.monotonic()
    run = subprocess.run([*argv, *command], env=env, capture_output=True, text=True, timeout=90)
    return run, time.monotonic() - started


@pytest.mark.parametrize("plugin", ["ib", "ibext_v8"])
def test_the_guard_stops_a_multi_node_rank_without_gpudirect_rdma(tmp_path, plugin):
    run, took = guard(
        tmp_path, 2, rank_printing(f"composed_{plugin}_no_gdr.log", then="time.sleep(60)")
    )
    assert run.returncode == 3, run.stderr
    assert took < 30  # stopped, not waited out
    host = os.uname().nodename
    assert f"azdl: InfiniBand check FAILED on rank 5 on {host}: NCCL uses" in run.stderr
    assert "GPU Direct RDMA Disabled for mlx5_ib0" in run.stderr
    outcome = classify("Failed", "", run.stdout + run.stderr)  # the job's log: both streams
    assert outcome.retry and outcome.reason.startswith("the guard stopped a rank"), outcome
    assert f"(on {host}: " in outcome.reason


def test_the_guard_lets_a_healthy_rank_run_on_once_its_first_channel_is_gdrdma(tmp_path):
    lines = log_lines("composed_ibext_v8_gdr.log")
    complete = next(i for i, x in enumerate(lines) if "Init COMPLETE" in x)
    code = (
        f"import time\nprint(*{lines[: complete + 1]!r}, sep='\\n', flush=True)\n"
        "time.sleep(2)  # the first collective comes later\n"
        f"print(*{lines[complete + 1 :]!r}, sep='\\n', flush=True)\nprint('step 1 done')\n"
    )
    run, _ = guard(tmp_path, 2, [sys.executable, "-c", code])
    assert run.returncode == 0, run.stderr
    assert "InfiniBand check passed on rank 5" in run.stderr
    assert "NCCL uses IBext_v8 with GPUDirect RDMA" in run.stderr
    assert run.stdout.endswith("step 1 done\n")


def test_the_guard_decides_on_the_init_lines_when_no_channel_comes_in_time(tmp_path):
    command = rank_printing("composed_ib_gdr.log", until="Init COMPLETE", then="time.sleep(5)")
    run, _ = guard(tmp_path, 2, command, "--connect-deadline", "2")
    assert run.returncode == 0, run.stderr
    assert "no channel of this rank crossed nodes within 2 s of Init COMPLETE" in run.stderr


def test_on_one_node_the_guard_warns_and_the_run_goes_on(tmp_path):
    run, _ = guard(tmp_path, 1, rank_printing("composed_ib_socket.log", then="sys.exit(0)"))
    assert run.returncode == 0, run.stderr
    assert "warning: InfiniBand check on rank 5" in run.stderr


@pytest.mark.parametrize(("level", "kept"), [("WARN", False), ("INFO", True)])
def test_after_the_check_nccl_info_goes_back_to_the_users_level(tmp_path, level, kept):
    command = rank_printing(
        "composed_ib_gdr.log",
        then="print('h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read')\n"
        "print('h:1:2 [0] NCCL WARN Cuda failure')",
    )
    run, _ = guard(tmp_path, 2, command, "--nccl-debug", level)
    assert run.returncode == 0, run.stderr
    assert "Init COMPLETE" in run.stdout and "/GDRDMA" in run.stdout  # the check's evidence
    assert ("via P2P/CUMEM/read\n" in run.stdout.split("GDRDMA")[-1]) == kept
    assert "NCCL WARN Cuda failure" in run.stdout
