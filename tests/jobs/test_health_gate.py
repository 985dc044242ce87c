"""The health gate on a node (`training.health.gate`), fed the recorded outputs of nvidia-smi and
all_reduce_perf in tests/jobs/data/nccl (their formats and sources: README.md there): pass, warn,
fail, wrong values, missing GPUs, and one bad node of four named."""

import json
import shlex
import sys
import types
from pathlib import Path

import pytest

from azdl.jobs.retry import classify
from infra.nccl_baselines import baseline
from training.health import gate, nccl_tests

DATA = Path(__file__).parent / "data" / "nccl"
H100 = baseline("Standard_ND96isr_H100_v5")


def recorded(name: str) -> str:
    return (DATA / name).read_text()


def gate_args(tmp_path, nodes: int, across: bool = False) -> list[str]:
    """The arguments `azdl submit` (`azdl cluster check`: across) gives the gate on
    ND96isr_H100_v5 (azdl.jobs.health)."""
    from azdl.jobs.health import gate_step
    from azdl.jobs.stack_outputs import parse_outputs
    from tests.support.job_fixtures import stack_outputs

    step = gate_step(parse_outputs(stack_outputs(), "test"), nodes, across_nodes=across)
    words = shlex.split(step)
    words = words[words.index("training.health.gate") + 1 :]
    return [w if not w.startswith("--out=") else f"--out={tmp_path}" for w in words]


def runner(
    smi="nvidia_smi_ok.txt",
    single="single_node_pass.txt",
    multi="multi_node_pass.txt",
    remaps="nvidia_smi_remaps_ok.txt",
    ib=None,
):
    """The tools' recorded outputs by command; `single` may be a list (one per run); `ib`: HCA
    -> ib_write_bw output (default: every HCA healthy). Every call must carry a timeout."""
    calls = []
    singles = iter(single if isinstance(single, list) else [single] * 10)

    def run(command, library_dir, timeout, server=None):
        calls.append(command)
        assert timeout > 0
        tool = Path(command[0]).name
        nccl_tests_run = tool.startswith("all_reduce_perf")
        assert library_dir == (str(Path(command[0]).parent) if nccl_tests_run else None)
        if tool == "nvidia-smi":
            return 0, recorded(remaps if command[1].startswith("--query-remapped") else smi)
        if tool == "ib_write_bw":
            assert server == command[:-1]  # the loopback: the same command without the host
            return 0, recorded((ib or {}).get(command[command.index("-d") + 1],
                                              "ib_write_bw_ok.txt"))  # fmt: skip
        name = {"all_reduce_perf": None, "all_reduce_perf_mpi": multi}[tool]
        return 0, recorded(name or next(singles))

    run.calls = calls
    return run


@pytest.fixture(autouse=True)
def nd_node_hcas(tmp_path, monkeypatch):
    """/sys/class/infiniband as an ND H100 v5 shows it: 8 InfiniBand HCAs and the
    accelerated-networking NIC (Ethernet link layer), as NHC's conf lists them."""
    root = tmp_path / "sys-infiniband"
    for name, layer in [*((f"mlx5_ib{i}", "InfiniBand") for i in range(8)),
                        ("mlx5_an0", "Ethernet")]:  # fmt: skip
        port = root / name / "ports" / "1"
        port.mkdir(parents=True)
        (port / "link_layer").write_text(layer + "\n")
    monkeypatch.setattr(gate.ib_write_bw, "SYS_INFINIBAND", root)
    return root


def on_node(monkeypatch, tmp_path, host: str, rank: int, local_rank: int = 0):
    monkeypatch.setattr(gate.socket, "gethostname", lambda: host)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", str(rank))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", str(local_rank))
    monkeypatch.setenv("TMPDIR", str(tmp_path / host))
    (tmp_path / host).mkdir(exist_ok=True)
    monkeypatch.setenv("AZUREML_RUN_ID", "job-1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def verdicts(capsys) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith(gate.PREFIX)]


def test_recorded_outputs_parse_to_their_figures_and_hosts():
    single = nccl_tests.parse(recorded("single_node_pass.txt"))
    assert (single.avg_busbw_gbps, single.largest_bytes, single.wrong_values) == (
        483.415, 17179869184, 0)  # fmt: skip
    assert single.largest_busbw_gbps == 483.28 and single.hosts == ("nd-node-0",)
    multi = nccl_tests.parse(recorded("multi_node_warn.txt"))
    assert multi.avg_busbw_gbps == 372.12 and multi.hosts == ("nd-node-0", "nd-node-1")
    assert nccl_tests.parse(recorded("single_node_wrong_values.txt")).wrong_values == 16
    with pytest.raises(ValueError, match="no all_reduce_perf results"):
        nccl_tests.parse("NCCL WARN NET/IB : Got completion with error 12\n")


# The sample of Azure/ai-infrastructure-on-azure skills/slurm/nccl_allreduce_test/SKILL.md
# (448d474, 2026-03-27; "Output Format", a full sweep): a published all_reduce_perf output.
PUBLISHED_SAMPLE = """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
           0             0     float     sum      -1     0.02    0.00    0.00      0     0.01    0.00    0.00      0
        1024           256     float     sum      -1    17.94    0.06    0.11      0    17.94    0.06    0.11      0
  17179869184    4294967296     float     sum      -1  18285.0  939.58  936.93      0  18292.6  939.19  936.54      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 487.265
"""  # noqa: E501


def test_a_published_output_parses_to_its_own_figures():
    result = nccl_tests.parse(PUBLISHED_SAMPLE)
    assert result.avg_busbw_gbps == 487.265  # a full sweep: small sizes pull the average down
    assert (result.largest_bytes, result.largest_busbw_gbps) == (17179869184, 936.93)
    assert result.wrong_values == 0


def test_healthy_two_nodes_pass_and_write_their_figures(monkeypatch, tmp_path, capsys):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    run = runner()
    assert gate.main(gate_args(tmp_path, 2, across=True), run) == 0
    lines = verdicts(capsys)
    assert lines[0].startswith("azdl-health: PASS nd-node-0: all-reduce bus bandwidth 483.415")
    assert any("PASS 2 nodes: all-reduce bus bandwidth 455.86" in line for line in lines)
    # the commands: nvidia-smi's two queries, the node's own 16 GiB all-reduce (20 iterations
    # after 5 warm-up), 8 HCA loopbacks, then the fabric's all-reduce
    assert [c[0] for c in run.calls[:2]] == ["nvidia-smi", "nvidia-smi"]
    assert run.calls[2] == ["/opt/nccl-tests/bin/all_reduce_perf", "-b", str(1 << 34),
                            "-e", str(1 << 34), "-f", "2", "-n", "20", "-w", "5", "-c", "1",
                            "-g", "8"]  # fmt: skip
    loopbacks = [c for c in run.calls if c[0].endswith("ib_write_bw")]
    assert [c[c.index("-d") + 1] for c in loopbacks] == [f"mlx5_ib{i}" for i in range(8)]
    assert loopbacks[3][loopbacks[3].index("-p") + 1 :][:1] == ["18513"]
    assert "--use_cuda=3" in loopbacks[3] and loopbacks[3][-1] == "nd-node-0"
    assert run.calls[-1][0].endswith("all_reduce_perf_mpi") and run.calls[-1][-2:] == ["-g", "1"]
    node = json.loads((tmp_path / "health" / "node-nd-node-0.json").read_text())
    assert node["status"] == "pass" and len(node["gpus"]) == 8
    fabric = json.loads((tmp_path / "health" / "multi-node.json").read_text())
    assert fabric["all_reduce"]["avg_busbw_gbps"] == 455.86
    assert fabric["all_reduce"]["hosts"] == ["nd-node-0", "nd-node-1"]


def test_before_training_the_gate_runs_no_mpi_program(monkeypatch, tmp_path, capsys):
    """Open MPI refuses a second MPI_Init by a rank (open-mpi/ompi#7025); training's is that."""
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    run = runner(multi="multi_node_fail.txt")
    assert gate.main(gate_args(tmp_path, 4), run) == 0
    assert [Path(c[0]).name for c in run.calls] == ["nvidia-smi", "nvidia-smi", "all_reduce_perf",
                                                    *["ib_write_bw"] * 8]  # fmt: skip
    assert not (tmp_path / "health" / "multi-node.json").exists()


def test_below_the_warning_level_the_figure_is_printed_and_training_goes_on(
    monkeypatch, tmp_path, capsys
):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    assert gate.main(gate_args(tmp_path, 2, True), runner(multi="multi_node_warn.txt")) == 0
    warn = [line for line in verdicts(capsys) if " WARN " in line]
    assert warn == [
        "azdl-health: WARN 2 nodes: all-reduce bus bandwidth 372.12 GB/s (expected about 450), "
        f"below the warning level {H100.multi_node.warn_below_gbps:g} (hosts nd-node-0, nd-node-1)"
    ]


def test_below_the_failure_level_the_job_stops_before_training(monkeypatch, tmp_path, capsys):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    assert gate.main(gate_args(tmp_path, 2, True), runner(multi="multi_node_fail.txt")) == 1
    lines = verdicts(capsys)
    assert any("FAIL 2 nodes: all-reduce bus bandwidth 211.865" in line for line in lines)
    assert "stops before training" in lines[-1]


def test_one_bad_node_of_four_is_named_and_stops_the_job(monkeypatch, tmp_path, capsys):
    codes = {}
    for n in range(4):
        host = f"nd-node-{n}"
        on_node(monkeypatch, tmp_path, host, rank=8 * n)
        single = "single_node_slow.txt" if n == 2 else "single_node_pass.txt"
        codes[host] = gate.main(gate_args(tmp_path, 4), runner(single=single))
    assert codes == {"nd-node-0": 0, "nd-node-1": 0, "nd-node-2": 1, "nd-node-3": 0}
    printed = verdicts(capsys)
    failed = [line for line in printed if " FAIL " in line]
    # azdl submit --max-retries reads the verdicts in the job's log: a retry, naming the node.
    assert classify("Failed", "", "\n".join(printed)).reason == (
        'the pre-flight health gate failed (on nd-node-2: docs/jobs.md, "A bad node")'
    )
    assert failed == [
        "azdl-health: FAIL nd-node-2: all-reduce bus bandwidth 300.995 GB/s (expected about "
        "478.87), below the failure level 460 (best of 3 runs)",
        "azdl-health: FAIL node nd-node-2 is unhealthy: the job stops before training "
        '(docs/jobs.md, "A bad node": what to do with it)',
    ]
    bad = json.loads((tmp_path / "health" / "node-nd-node-2.json").read_text())
    assert bad["status"] == "fail" and bad["all_reduce"]["avg_busbw_gbps"] == 300.995


def test_the_nodes_other_ranks_follow_local_rank_0s_verdict(monkeypatch, tmp_path):
    on_node(monkeypatch, tmp_path, "nd-node-2", rank=16)
    assert gate.main(gate_args(tmp_path, 1), runner(single="single_node_slow.txt")) == 1
    on_node(monkeypatch, tmp_path, "nd-node-2", rank=17, local_rank=1)
    run = runner()
    assert gate.main(gate_args(tmp_path, 1), run) == 1  # read from the node's marker
    assert run.calls == []  # only local rank 0 measures the node


@pytest.mark.parametrize(
    ("smi", "single", "message"),
    [
        ("nvidia_smi_seven_gpus.txt", "single_node_pass.txt", "7 GPUs visible, the VM size has 8"),
        ("nvidia_smi_uncorrectable.txt", "single_node_pass.txt",
         "GPU 3 (00000008:00:00.0): 2 uncorrectable ECC errors"),
        ("nvidia_smi_ok.txt", "single_node_wrong_values.txt", "all-reduce gave 16 wrong values"),
    ],
)  # fmt: skip
def test_gpu_and_data_faults_fail_the_node(monkeypatch, tmp_path, capsys, smi, single, message):
    on_node(monkeypatch, tmp_path, "nd-node-1", rank=8)
    assert gate.main(gate_args(tmp_path, 1), runner(smi=smi, single=single)) == 1
    assert any(message in line and " FAIL nd-node-1: " in line for line in verdicts(capsys))


class MlflowException(Exception):
    """Stands for mlflow.exceptions.MlflowException (mlflow is not in the operator env)."""


@pytest.fixture
def mlflow(monkeypatch, mocker):
    module = mocker.MagicMock()
    monkeypatch.setitem(sys.modules, "mlflow", module)
    monkeypatch.setitem(sys.modules, "mlflow.exceptions",
                        types.SimpleNamespace(MlflowException=MlflowException))  # fmt: skip
    return module


def test_figures_go_to_mlflow_when_the_job_has_a_tracking_uri(monkeypatch, tmp_path, mlflow):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "azureml://example")
    assert gate.main(gate_args(tmp_path, 2, across=True), runner()) == 0
    logged = [c.args[0] for c in mlflow.log_metrics.call_args_list]
    assert logged == [
        {"health/single_node_busbw_gbps/nd-node-0": 483.415},
        {"health/multi_node_busbw_gbps": 455.86},
    ]


def test_an_mlflow_that_refuses_the_figures_is_a_warning_not_a_failed_gate(
    monkeypatch, tmp_path, mlflow, capsys
):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "azureml://example")
    mlflow.log_metrics.side_effect = MlflowException("no tracking store for scheme 'azureml'")
    assert gate.main(gate_args(tmp_path, 1), runner()) == 0
    assert any("WARN MLflow did not take the figures" in line for line in verdicts(capsys))


def test_a_tool_missing_from_the_image_fails_the_node_and_frees_its_other_ranks(
    monkeypatch, tmp_path, capsys
):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    args = [*gate_args(tmp_path, 1), f"--bin-dir={tmp_path / 'nowhere'}"]
    monkeypatch.setattr(gate.nvidia_smi, "COMMAND", ("cat", str(DATA / "nvidia_smi_ok.txt")))
    monkeypatch.setattr(gate.nvidia_smi, "REMAP_COMMAND",
                        ("cat", str(DATA / "nvidia_smi_remaps_ok.txt")))  # fmt: skip
    assert gate.main(args) == 1  # the real runner: all_reduce_perf is not there
    failed = [line for line in verdicts(capsys) if " FAIL nd-node-0: " in line]
    assert "no all_reduce_perf results in the output" in failed[0] and "exit 127" in failed[0]
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=1, local_rank=1)
    assert gate.main(args) == 1  # the marker says fail: no wait


def test_nccl_tests_get_their_library_folder_for_their_own_process_only(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    code, out = gate.run_command(["sh", "-c", "echo $LD_LIBRARY_PATH"], "/opt/nccl-tests/bin")
    assert (code, out) == (0, "/opt/nccl-tests/bin:/usr/local/nvidia/lib64\n")
    assert gate.run_command(["sh", "-c", "echo $LD_LIBRARY_PATH"])[1] == "/usr/local/nvidia/lib64\n"


def test_a_pending_row_remap_fails_the_node_naming_the_gpu(monkeypatch, tmp_path, capsys):
    on_node(monkeypatch, tmp_path, "nd-node-1", rank=8)
    assert gate.main(gate_args(tmp_path, 1), runner(remaps="nvidia_smi_remap_pending.txt")) == 1
    failed = [line for line in verdicts(capsys) if " FAIL nd-node-1: " in line]
    assert failed == [
        "azdl-health: FAIL nd-node-1: GPU 00000008:00:00.0: a row remap is pending (reset the "
        "GPU or reboot the node before using it)"
    ]
    parsed = gate.nvidia_smi.parse_remaps(recorded("nvidia_smi_remap_pending.txt"))
    assert [(g.pending, g.uncorrectable) for g in parsed][3] == (True, 2)
    assert gate.nvidia_smi.parse_remaps("0000:01:00.0, No, No, 0\n")[0].pending is False


def test_each_infiniband_hca_is_tested_with_a_gpudirect_loopback_against_azures_level(
    monkeypatch, tmp_path, capsys
):
    on_node(monkeypatch, tmp_path, "nd-node-1", rank=8)
    run = runner(ib={"mlx5_ib3": "ib_write_bw_slow.txt"})
    assert gate.main(gate_args(tmp_path, 1), run) == 1
    lines = verdicts(capsys)
    assert lines[:2] == [
        "azdl-health: PASS nd-node-1: all-reduce bus bandwidth 483.415 GB/s (expected about "
        "478.87)",
        "azdl-health: FAIL nd-node-1: mlx5_ib3 (GPU 3): GPUDirect RDMA loopback 211.8 Gb/s, "
        "below the failure level 380",
    ]
    assert lines[-1].startswith("azdl-health: FAIL node nd-node-1 is unhealthy")
    report = json.loads((tmp_path / "health" / "node-nd-node-1.json").read_text())
    assert report["ib_write_bw_gbps"]["mlx5_ib0"] == 392.37
    assert "mlx5_an0" not in report["ib_write_bw_gbps"]  # Ethernet: not an InfiniBand HCA


def test_a_missing_hca_fails_the_node(monkeypatch, tmp_path, capsys, nd_node_hcas):
    (nd_node_hcas / "mlx5_ib5" / "ports" / "1" / "link_layer").unlink()
    on_node(monkeypatch, tmp_path, "nd-node-1", rank=8)
    assert gate.main(gate_args(tmp_path, 1), runner()) == 1
    assert any(
        "nd-node-1: 7 InfiniBand HCAs (mlx5_ib0, mlx5_ib1, mlx5_ib2, mlx5_ib3, mlx5_ib4, "
        "mlx5_ib6, mlx5_ib7), the VM size has 8" in line
        for line in verdicts(capsys)
    )


def test_a_noisy_run_is_repeated_and_the_best_one_judged(monkeypatch, tmp_path, capsys):
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)
    run = runner(single=["single_node_slow.txt", "single_node_pass.txt"])
    assert gate.main(gate_args(tmp_path, 1), run) == 0
    assert sum(c[0].endswith("all_reduce_perf") for c in run.calls) == 2
    assert any("PASS nd-node-0: all-reduce bus bandwidth 483.415 GB/s (expected about 478.87) "
               "(best of 2 runs)" in line for line in verdicts(capsys))  # fmt: skip


def test_a_tool_that_hangs_is_stopped_at_its_timeout_and_fails_the_node(monkeypatch, tmp_path):
    code, text = gate.run_command([sys.executable, "-c", "import time; time.sleep(30)"],
                                  timeout=1)  # fmt: skip
    assert code == gate.TIMED_OUT and "no result after 1 s (stopped)" in text
    on_node(monkeypatch, tmp_path, "nd-node-0", rank=0)

    def hung(command, library_dir, timeout, server=None):
        return gate.run_command([sys.executable, "-c", "import time; time.sleep(30)"],
                                timeout=0.5)  # fmt: skip

    assert gate.main(gate_args(tmp_path, 1), hung) == 1


def test_the_loopback_starts_its_server_first_and_waits_for_it(tmp_path):
    marker = tmp_path / "served"
    server = [sys.executable, "-c", f"import pathlib; pathlib.Path({str(marker)!r}).touch()"]
    client = [
        sys.executable,
        "-c",
        f"import pathlib; print(pathlib.Path({str(marker)!r}).exists())",
    ]
    monkeypatch_start = gate.SERVER_START_S
    gate.SERVER_START_S = 1
    try:
        assert gate.run_command(client, timeout=10, server=server) == (0, "True\n")
    finally:
        gate.SERVER_START_S = monkeypatch_start


def test_the_other_ranks_of_a_node_stop_waiting_for_a_verdict_that_never_comes(tmp_path, capsys):
    ticks = iter(range(0, 10_000, 100))
    status = gate.wait_for(tmp_path / "never", 250, sleep=lambda s: None,
                           clock=lambda: next(ticks))  # fmt: skip
    assert status == "fail"
    assert "no verdict from this node's local rank 0 after 250 s" in capsys.readouterr().out
