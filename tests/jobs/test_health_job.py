"""The health gate in submitted jobs: on by default for multi-node InfiniBand jobs, its levels
from the size's baseline, shown by a dry run; `azdl cluster check` runs it as a job of its own."""

import json

import pytest
from job_commands import after_events, runs

from azdl.cli import main
from training.flavours import entry_module

GATE = runs("training.health.gate")


def gate_of(command: str) -> str | None:
    first = after_events(command).split(" && ")[0]
    return first if first.startswith(f"{GATE} ") else None


@pytest.mark.parametrize(
    ("vm_size", "nodes", "flag", "on"),
    [
        ("Standard_ND96isr_H100_v5", 2, None, True),  # multi-node InfiniBand: on by default
        ("Standard_ND96isr_H100_v5", 1, None, False),
        ("Standard_ND96isr_H100_v5", 2, "--no-health-check", False),
        ("Standard_ND96isr_H100_v5", 1, "--health-check", True),
        ("Standard_NC96ads_A100_v4", 2, None, False),  # no InfiniBand
        ("Standard_NC96ads_A100_v4", 2, "--health-check", True),
    ],
)
def test_the_gate_runs_before_training_where_asked_or_by_default(
    ml_client, outputs_file, vm_size, nodes, flag, on
):
    argv = ["submit", "--outputs", str(outputs_file(vm_size=vm_size)), "--nodes", str(nodes),
            "--storage", "synthetic", "--name", "g1", *([flag] if flag else [])]  # fmt: skip
    assert main(argv) == 0
    job = ml_client.return_value.jobs.create_or_update.call_args.args[0]
    assert (gate_of(job.command) is not None) == on
    assert ("health" in job.outputs) == on
    if on:
        assert (
            job.outputs["health"].path == "azureml://datastores/azdl_outputs/paths/azdl/g1/health/"
        )
        assert f"python -m {entry_module('keras')} " in after_events(job.command).split(" && ")[1]


def test_a_dry_run_shows_the_gate_and_its_levels(ml_client, outputs_file, capsys):
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5")
    assert main(["submit", "--outputs", str(path), "--nodes", "2", "--storage", "synthetic",
                 "--name", "g2", "--dry-run"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    header, gate = out.splitlines()[:2]  # the gate line follows the dry run's header
    assert header.startswith("# azdl --dry-run: ")
    assert gate.startswith("# health gate before training: Standard_ND96isr_H100_v5: single-node")
    assert "fail below 460; measured 478.87 GB/s at 8 G (Azure/AI-benchmarking-guide)" in out
    assert "GPUDirect RDMA loopback per InfiniBand HCA >= 380 Gb/s (NHC check_ib_bw_gdr)" in out
    assert "multi-node" not in gate  # the fabric is `azdl cluster check`'s
    command = after_events(" ".join(out.split("\ncommand: ", 1)[1].split("\ncode:")[0].split()))
    assert command.startswith(
        f"{GATE} --gpus=8 --nodes=2 --bytes=17179869184 --out=${{{{outputs.health}}}}"
    )
    assert "--single-expected=478.87 --single-fail=460 --ib-write-gbps=380 --hcas=8 && " in out
    assert "--across-nodes" not in out and "--multi-" not in out
    ml_client.assert_not_called()


def test_a_size_without_a_baseline_reports_figures_without_judging(outputs):
    from azdl.jobs.health import UNJUDGED_BYTES, gate_step

    step = gate_step(outputs(vm_size="Standard_NC96ads_A100_v4"), 2)
    assert (
        f"--bytes={UNJUDGED_BYTES}" in step and "--single-" not in step and "--multi-" not in step
    )


def test_the_gate_needs_gpus(ml_client, outputs_file, capsys):
    path = outputs_file(vm_size="Standard_D4s_v3")
    assert main(["submit", "--outputs", str(path), "--health-check", "--storage", "synthetic"]) == 2
    assert "--health-check needs GPUs" in capsys.readouterr().err
    assert main(["cluster", "check", "--outputs", str(path)]) == 2
    ml_client.return_value.jobs.create_or_update.assert_not_called()


def test_cluster_check_runs_the_gate_alone_and_prints_its_verdicts(
    ml_client, outputs_file, capsys, mocker
):
    client = ml_client.return_value
    client.jobs.get.return_value.status = "Completed"
    mocker.patch("azdl.jobs.workspace.job_logs", return_value=(
        "x\nazdl-health: PASS nd-node-0: all-reduce bus bandwidth 483.415 GB/s\ny\n"))  # fmt: skip
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    assert main(["cluster", "check", "--outputs", str(path), "--nodes", "3", "--name", "c1"]) == 0
    job = client.jobs.create_or_update.call_args.args[0]
    assert job.command.startswith(f"{GATE} --gpus=8 --nodes=3 ")
    assert " && " not in job.command  # nothing but the gate: its MPI all-reduce may run
    assert "--across-nodes" in job.command and "--multi-warn=400 --multi-fail=300" in job.command
    assert job.resources.instance_count == 3 and job.distribution.process_count_per_instance == 8
    assert job.tags["azdl.task"] == "cluster-check"
    captured = capsys.readouterr()
    assert "multi-node ~450 GB/s (warn below 400, fail below 300" in captured.out
    assert "azdl-health: PASS nd-node-0" in captured.err
    assert main(["cluster", "check", "--outputs", str(path), "--nodes", "5"]) == 2


def test_cluster_check_json_is_one_document_with_the_verdicts(
    ml_client, outputs_file, capsys, mocker
):
    client = ml_client.return_value
    client.jobs.get.return_value.status = "Completed"
    client.jobs.get.return_value.studio_url = "https://ml.azure.com/runs/c2"
    mocker.patch("azdl.jobs.workspace.job_logs", return_value=(
        "x\nazdl-health: PASS nd-node-0: all-reduce bus bandwidth 483.415 GB/s\ny\n"))  # fmt: skip
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    argv = ["cluster", "check", "--outputs", str(path), "--name", "c2", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "schema": "azdl.cluster-check-result/v1", "name": "c2", "status": "Completed",
        "url": "https://ml.azure.com/runs/c2",
        "verdicts": ["azdl-health: PASS nd-node-0: all-reduce bus bandwidth 483.415 GB/s"],
    }  # fmt: skip
    assert "single-node" in captured.err  # the levels, with the job's progress, on stderr
    assert main([*argv, "--dry-run"]) == 2
