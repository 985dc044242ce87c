"""The health gate on a node (`training.health.gate`), fed the recorded outputs of nvidia-smi and
all_reduce_perf in tests/jobs/data/nccl (their formats and sources: README.md there): pass, warn,
fail, wrong values, missing GPUs, and one bad node of four named."""

import json
import sys
import types
from pathlib import Path

import pytest

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
    from tests.jobs.conftest import stack_outputs

    step = gate_step(parse_outputs(stack_outputs(), "test"), nodes, across_nodes=across)
    words = step.split()[3:]  # after `python -m training.health.gate`
    return [w if not w.startswith("--out=") else f"--out={tmp_path}" for w in words]


def runner(smi="nvidia_smi_ok.txt", single="single_node_pass.txt", multi="multi_node_pass.txt"):
    calls = []

    def run(command, library_dir):
        calls.append(command)
        nccl_tests_run = Path(command[0]).name.startswith("all_reduce_perf")
        assert library_dir == (str(Path(command[0]).parent) if nccl_tests_run else None)
        tool = Path(command[0]).name
        name = {"nvidia-smi": smi, "all_reduce_perf": single, "all_reduce_perf_mpi": multi}[tool]
        return 0, recorded(name)

    run.calls = calls
    return run


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
    # the commands: nvidia-smi's query, then the node's own and the fabric's 16 GiB all-reduce
    assert run.calls[0][0] == "nvidia-smi"
    assert run.calls[1][:7] == ["/opt/nccl-tests/bin/all_reduce_perf", "-b", str(1 << 34),
                                "-e", str(1 << 34), "-f", "2"]  # fmt: skip
    assert run.calls[1][7:9] == ["-g", "8"] and run.calls[2][7:9] == ["-g", "1"]
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
    assert [Path(c[0]).name for c in run.calls] == ["nvidia-smi", "all_reduce_perf"]
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
    failed = [line for line in verdicts(capsys) if " FAIL " in line]
    assert failed == [
        "azdl-health: FAIL nd-node-2: all-reduce bus bandwidth 300.995 GB/s (expected about "
        "460), below the failure level 460",
        "azdl-health: FAIL node nd-node-2 is unhealthy: the job stops before training",
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
