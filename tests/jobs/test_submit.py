"""`azdl submit` with MLClient mocked: the job object it is given, and the errors raised before
anything is submitted."""

import subprocess
from pathlib import Path

import pytest
from azure.ai.ml import MpiDistribution
from job_commands import runs, unguarded

from azdl.cli import main
from azdl.errors import AzdlError
from azdl.jobs import budget
from azdl.jobs.azureml import NFS_MOUNT_POINT
from azdl.jobs.request import JobRequest
from azdl.jobs.safeguards import stall_environment
from azdl.jobs.spec import build_job
from azdl.jobs.stack_outputs import load_outputs
from training import live


def submitted(ml_client):
    """The one job handed to MLClient.jobs.create_or_update."""
    create = ml_client.return_value.jobs.create_or_update
    assert create.call_count == 1
    return create.call_args.args[0]


def test_infiniband_job_has_one_process_per_gpu_and_keeps_infiniband_on(
    ml_client, outputs_file, capsys
):
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    code = main(["submit", "--outputs", str(path), "--framework", "keras", "--nodes", "2",
                 "--storage", "mount", "--data-path", "imagenet", "--name", "run-1",
                 "--no-health-check",
                 "--", "--epochs", "3", "--batch-size", "256", "--precision", "fp16"])  # fmt: skip
    assert code == 0
    job = submitted(ml_client)
    assert isinstance(job.distribution, MpiDistribution)
    assert job.distribution.process_count_per_instance == 8  # ND96isr_H100_v5: 8 GPUs
    assert job.resources.instance_count == 2
    assert job.resources.shm_size == "16g"
    assert job.compute == "gpu-cluster"
    assert job.environment.endswith("/environments/azdl-tensorflow/versions/abc")
    assert job.identity.client_id == "client-id-1"
    data = job.inputs["data"]
    # Azure ML job inputs and outputs take datastore URIs (the stack's identity-based ones)
    assert data.path == "azureml://datastores/azdl_training_data/paths/imagenet/"
    assert (data.type, data.mode) == ("uri_folder", "ro_mount")
    for name in ("checkpoints", "logs"):
        out = job.outputs[name]
        assert out.path == f"azureml://datastores/azdl_outputs/paths/azdl/run-1/{name}/"
        assert (out.type, out.mode) == ("uri_folder", "rw_mount")
    env = job.environment_variables
    assert env["NCCL_IB_DISABLE"] == "0"
    assert env["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert unguarded(job.command).startswith(
        "python -m training.tensorflow.train_keras --epochs 3 --batch-size 256 "
    )
    assert "--precision fp16" in job.command
    assert "--data-dir '${{inputs.data}}'" in job.command
    assert "--checkpoint-dir '${{outputs.checkpoints}}'" in job.command
    assert "--log-dir '${{outputs.logs}}'" in job.command
    assert "submitted run-1: https://ml.azure.com/runs/run-1" in capsys.readouterr().out


def test_gpu_size_without_infiniband_disables_the_ib_probe(outputs):
    stack = outputs(vm_size="Standard_NC96ads_A100_v4")
    job = build_job(stack, JobRequest("torch", 1, "synthetic", "run-2"))
    assert job.distribution.process_count_per_instance == 4
    assert job.environment_variables["NCCL_IB_DISABLE"] == "1"
    assert job.environment.endswith("/environments/azdl-pytorch/versions/def")
    assert job.inputs == {}
    assert "--data-dir" not in job.command
    assert unguarded(job.command).startswith("python -m training.torch.train ")
    assert " --threads 24 " in job.command  # NC96ads_A100_v4: 96 vCPUs, 4 GPUs


def test_each_process_gets_its_share_of_the_vcpus_unless_the_options_say(outputs):
    """mpirun may pin a rank to a socket, where its own affinity undercounts its share."""
    h100 = outputs(vm_size="Standard_ND96isr_H100_v5")  # 96 vCPUs, 8 GPUs
    assert " --threads 12 " in build_job(h100, JobRequest("keras", 1, "synthetic", "r")).command
    cpu = outputs(vm_size="Standard_D4s_v3")  # 4 vCPUs, one process
    assert " --threads 4 " in build_job(cpu, JobRequest("tf", 1, "synthetic", "r")).command
    for given in (("--threads", "3"), ("--threads=3",)):
        command = build_job(h100, JobRequest("torch", 1, "synthetic", "r", given)).command
        assert command.count("--threads") == 1 and "3" in command


def test_cpu_size_runs_one_process_per_node_without_nccl_and_rejects_gpu_options(
    ml_client, outputs_file, capsys
):
    path = outputs_file(vm_size="Standard_D4s_v3", max_nodes=2)
    assert main(["submit", "--outputs", str(path), "--nodes", "2", "--storage", "synthetic"]) == 0
    job = submitted(ml_client)
    assert job.distribution.process_count_per_instance == 1
    # No NCCL on CPU sizes: the stall guard's, and the nodes' rate for the live cost in MLflow.
    rate = {live.RATE_ENV: job.tags[budget.RATE_TAG]}
    assert job.environment_variables == stall_environment(600) | rate
    for option in (["--precision", "fp16"], ["--fp16-allreduce"]):
        ml_client.reset_mock()
        code = main(["submit", "--outputs", str(path), "--storage", "synthetic", "--", *option])
        assert code == 2
        assert f"{option[0]} needs GPUs" in capsys.readouterr().err
        ml_client.assert_not_called()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "5"], "--nodes 5 is not possible on cluster 'gpu-cluster'"),
        (["--nodes", "0"], "argument --nodes: '0': expected at least 1"),  # argparse's
        (["--", "--data-dir", "/x"], "--data-dir is set by submit"),
        (["--", "--log-dir=/x"], "--log-dir is set by submit"),
        (["--", "--precision", "fp8"], "the keras training script rejects the options"),
    ],
)
def test_bad_requests_fail_before_anything_is_submitted(
    ml_client, outputs_file, capsys, argv, message
):
    path = outputs_file(max_nodes=4)
    try:
        code = main(["submit", "--outputs", str(path), *argv])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    ml_client.assert_not_called()


def test_nfs_needs_a_share_and_mounts_it_through_docker(ml_client, outputs_file, capsys):
    code = main(["submit", "--outputs", str(outputs_file(nfs=False)), "--storage", "nfs"])
    assert code == 2
    assert "has no NFS share (nfsMountTarget is null)" in capsys.readouterr().err
    ml_client.assert_not_called()

    path = outputs_file(nfs=True)
    assert main(["submit", "--outputs", str(path), "--storage", "nfs", "--data-path", "in1k"]) == 0
    job = submitted(ml_client)
    assert job.inputs == {}
    assert f"--data-dir {NFS_MOUNT_POINT}/in1k " in job.command
    flag, volume = job.resources.docker_args
    assert flag == "--mount"
    assert f"dst={NFS_MOUNT_POINT}" in volume
    assert "volume-opt=type=nfs" in volume
    assert '"volume-opt=o=addr=azdlprodnfs.file.core.windows.net,vers=4,minorversion=1' in volume
    assert "volume-opt=device=:/azdlprodnfs/training-data" in volume


def test_copy_mode_copies_each_nodes_shards_to_local_disk_before_training(outputs):
    job = build_job(outputs(), JobRequest("keras", 2, "copy", "run-3", local_dir="/mnt/nvme/d"))
    copy, train = unguarded(job.command).split(" && ")
    assert (
        copy
        == f"{runs('training.data.copy_shards')} --source '${{{{inputs.data}}}}' --dest /mnt/nvme/d"
    )
    assert train.startswith(
        "python -m training.tensorflow.train_keras --threads 12 --data-dir /mnt/nvme/d "
    )
    assert job.inputs["data"].mode == "ro_mount"
    # no --data-path: the whole data container
    assert job.inputs["data"].path == "azureml://datastores/azdl_training_data/paths/"


def test_dry_run_prints_the_request_and_never_calls_azure(ml_client, outputs_file, capsys):
    path = outputs_file()
    code = main(["submit", "--outputs", str(path), "--nodes", "3", "--dry-run", "--name", "r9"])
    assert code == 0
    ml_client.assert_not_called()
    out = capsys.readouterr().out
    assert "process_count_per_instance: 8" in out
    assert "instance_count: 3" in out
    assert "NCCL_IB_DISABLE: '0'" in out
    assert "path: azureml://datastores/azdl_training_data/paths/\n" in out
    assert "path: azureml://datastores/azdl_outputs/paths/azdl/r9/checkpoints/\n" in out


def test_wait_streams_the_logs_and_exits_non_zero_for_a_failed_job(ml_client, outputs_file):
    client = ml_client.return_value
    client.jobs.get.return_value.status = "Failed"
    assert main(["submit", "--outputs", str(outputs_file()), "--wait", "--name", "r10"]) == 1
    client.jobs.stream.assert_called_once_with("r10")
    client.jobs.get.return_value.status = "Completed"
    assert main(["submit", "--outputs", str(outputs_file()), "--wait", "--name", "r11"]) == 0


def test_missing_outputs_and_unknown_stacks_are_clear_errors(tmp_path, outputs_file, mocker):
    broken = tmp_path / "old.json"
    broken.write_text('{"resourceGroupName": "rg", "clusterName": "c"}')
    with pytest.raises(AzdlError, match="lacks the stack outputs subscriptionId, workspaceName"):
        load_outputs(outputs_file=broken)
    with pytest.raises(AzdlError, match="no such file"):
        load_outputs(outputs_file=tmp_path / "nope.json")
    with pytest.raises(AzdlError, match="unknown VM size 'Standard_NC24r'"):
        load_outputs(outputs_file=outputs_file(vm_size="Standard_NC24r"))

    mocker.patch("shutil.which", return_value=None)
    with pytest.raises(AzdlError, match=r"Pulumi CLI is not on PATH.*--outputs staging\.json"):
        load_outputs(stack="staging")
    mocker.patch("shutil.which", return_value="/usr/bin/pulumi")
    run = mocker.patch(
        "subprocess.run",
        return_value=subprocess.CompletedProcess([], 255, "", "error: no stack named 'qa' found"),
    )
    with pytest.raises(AzdlError, match=r"stack 'qa'.*no stack named 'qa' found"):
        load_outputs(stack="qa")
    assert run.call_args.args[0] == [
        "/usr/bin/pulumi",
        "stack",
        "output",
        "--json",
        "--stack",
        "qa",
    ]
    assert (Path(run.call_args.kwargs["cwd"]) / "Pulumi.yaml").is_file()


def test_the_shipped_example_outputs_work_for_a_dry_run_without_azure(ml_client, capsys):
    """README's fresh-machine example: docs/stack-outputs.example.json has every key submit
    reads, in the shape the program exports (see tests/images for the program's outputs)."""
    example = Path(__file__).resolve().parents[2] / "docs" / "stack-outputs.example.json"
    code = main(
        ["submit", "--outputs", str(example), "--nodes", "2", "--dry-run", "--", "--epochs", "1"]
    )
    assert code == 0
    ml_client.assert_not_called()
    out = capsys.readouterr().out
    assert "environments/azdl-tensorflow/versions/" in out
    assert "instance_count: 2" in out
