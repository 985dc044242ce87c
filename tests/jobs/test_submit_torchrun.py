"""`azdl submit --launcher torchrun`: an Azure ML job with `distribution: pytorch`, one torchrun
per node (process_count_per_instance 1), read back by azure-ai-ml's own loader; its safeguards
(the collective timeout, PyTorch's NCCL watchdog and flight recorder, the guard, the health gate)
and its copy step, whose ranks training.data.copy_shards reads as the node's."""

import re
import shlex

import pytest
import yaml
from azure.ai.ml import MpiDistribution, PyTorchDistribution, load_job
from job_commands import after_events, runs

from azdl.cli import main
from azdl.jobs.request import JobRequest
from azdl.jobs.spec import build_job
from azdl.launchers import PIP_TIMEOUT_S, RENDEZVOUS_TIMEOUT_S
from training.health import gate


def export(outputs_file, tmp_path, *extra, **stack) -> tuple[dict, object]:
    out = tmp_path / "job.yml"
    argv = ["submit", "--outputs", str(outputs_file(**stack)), "--launcher", "torchrun",
            "--framework", "torch", "--name", "tr-1", "--export", str(out), *extra]  # fmt: skip
    assert main(argv) == 0
    return yaml.safe_load(out.read_text()), load_job(out)


def test_export_loads_as_a_pytorch_distribution_job_with_one_torchrun_per_node(
    ml_client, outputs_file, tmp_path
):
    raw, job = export(outputs_file, tmp_path, "--nodes", "2", "--max-restarts", "2",
                      "--", "--epochs", "3")  # fmt: skip
    ml_client.assert_not_called()
    assert raw["distribution"] == {"type": "pytorch", "process_count_per_instance": 1}
    assert isinstance(job.distribution, PyTorchDistribution)  # azure-ai-ml's own loader
    assert job.distribution.process_count_per_instance == 1
    assert job.resources.instance_count == 2
    assert job._validate().passed
    torchrun = re.search(r"torchrun (.*?) --no-python ", job.command).group(1)
    # Node 0 hosts the store and waits out the other nodes' gate and pip step; NODE_RANK is
    # required; each node is reached at its own address (training.node_address).
    wait = RENDEZVOUS_TIMEOUT_S
    assert torchrun == (
        "--nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d "
        '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id=tr-1 '
        '--rdzv-conf="is_host=$(( ${NODE_RANK:?not set: Azure ML sets it on every node of a '
        f'pytorch job}} == 0 )),read_timeout={wait},join_timeout={wait}" '
        '--local-addr="${AZDL_NODE_ADDR:?no address of this node}" --max-restarts=2'
    )
    assert wait >= gate.WORST_CASE_S + PIP_TIMEOUT_S
    worker = job.command.split(" --no-python ", 1)[1]
    assert worker.startswith(
        f"{runs('training.rank_output')} -- "  # each line labelled with its rank
        f"{runs('training.guard')} --ranks-dir '${{{{outputs.logs}}}}/ranks' --check-infiniband "
        "--nodes 2 --hcas 8 --nccl-debug WARN --init-deadline 600 --progress-timeout 900 "
        "--first-step-timeout 1800 --post-mortem-gpus 8 -- python -m training.torch.train "
        "--epochs 3 "
    )  # the guard as under MPI: init deadline and step watchdog too
    assert job.tags["azdl.launcher"] == "torchrun"


def test_torchrun_jobs_get_pytorchs_watchdog_and_flight_recorder_in_the_logs_folder(
    ml_client, outputs_file, tmp_path
):
    _, job = export(outputs_file, tmp_path, "--stall-timeout", "300")
    env = job.environment_variables
    assert env["AZDL_COLLECTIVE_TIMEOUT_S"] == "300"  # the built-in's process group timeout
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert int(env["TORCH_FR_BUFFER_SIZE"]) > 0
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "HOROVOD_STALL_CHECK_TIME_SECONDS" not in env
    # The dump prefix points into the job's logs output (Azure ML fills in ${{...}} in the
    # command only), made before torchrun starts; a failed torchrun is followed by the report.
    assert (
        "export TORCH_FR_DUMP_TEMP_FILE='${{outputs.logs}}/flight-recorder/rank_' "
        "AZDL_STOP_DIR='${{outputs.logs}}/stops' && mkdir -p '${{outputs.logs}}/flight-recorder' "
        f'&& {{ export AZDL_NODE_ADDR="$({runs("training.node_address")})" '
        f'AZDL_RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT" && {runs("training.job_stop")} run '
        '"${AZDL_STOP_DIR:?}" -- torchrun ' in job.command
    )
    assert job.command.endswith(
        f"|| {{ code=$?; {runs('training.flight_recorder')} "
        "'${{outputs.logs}}/flight-recorder/rank_' --world-size=8 "
        "'--ranks-dir=${{outputs.logs}}/ranks' --wait=60; exit $code; }; }"
    )


def test_the_health_gate_runs_once_per_node_before_torchrun(ml_client, outputs_file, tmp_path):
    _, job = export(outputs_file, tmp_path, "--nodes", "2")  # multi-node IB: gate on
    gate, rest = after_events(job.command).split(" && ", 1)
    assert gate.startswith(f"{{ {runs('training.health.gate')} --gpus=8 --nodes=2 ")
    # A node whose gate failed tells the others' torchrun to end (training.job_stop).
    assert gate.endswith(
        f" || {{ {runs('training.job_stop')} write '${{{{outputs.logs}}}}/stops' --exit 1 --why "
        "'its health gate failed (azdl-health: FAIL above)'; exit 1; }; }"
    )
    assert rest.startswith("export TORCH_FR_DUMP_TEMP_FILE=")


def test_each_worker_copies_before_it_trains_as_under_mpi(outputs):
    """torchrun numbers the nodes itself (its c10d rendezvous sorts them by address), so the
    copy runs in each worker, where RANK and LOCAL_RANK are torchrun's, as under MPI."""
    job = build_job(outputs(), JobRequest("torch", 2, "copy", "r", launcher="torchrun"))
    worker = shlex.split(job.command.split(" --no-python ", 1)[1].split(" || ")[0])
    labels = len(shlex.split(runs("training.rank_output"))) + 1  # and its `--`
    assert worker[labels : labels + 2] == ["bash", "-c"]  # the labeller's command: all of it
    assert worker[labels + 2].startswith(
        f"{runs('training.data.copy_shards')} --source '${{{{inputs.data}}}}' "
        f"--dest /tmp/azdl-data && exec {runs('training.guard')} "
    )


def test_a_users_script_keeps_its_own_collective_timeout(ml_client, outputs_file, tmp_path, capsys):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("import torch\n")
    base = ["submit", "--outputs", str(outputs_file()), "--launcher", "torchrun",
            "--script", str(tmp_path / "code" / "train.py"),
            "--export", str(tmp_path / "j.yml")]  # fmt: skip
    assert main(base) == 0
    job = load_job(tmp_path / "j.yml")
    assert "AZDL_COLLECTIVE_TIMEOUT_S" not in job.environment_variables
    assert job.environment_variables["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"  # PyTorch reads these
    assert job.command.split(" --no-python ", 1)[1].split(" -- ")[2].startswith("python train.py")
    assert main([*base, "--stall-timeout", "120"]) == 2
    assert "your script sets its own (init_process_group" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--launcher", "torchrun", "--framework", "keras"],
         "the keras flavour runs under Horovod only"),
        (["--max-restarts", "1"], "--max-restarts is torchrun's"),
        (["--launcher", "slurm"], "argument --launcher: invalid choice: 'slurm'"),
        (["--launcher", "mpi"], "'mpi' is no launcher any more: say --launcher horovod "
                                "(Azure ML's MPI; the default)"),
    ],
)  # fmt: skip
def test_what_torchrun_cannot_do_is_refused_before_anything_is_submitted(
    ml_client, outputs_file, capsys, argv, message
):
    try:
        code = main(["submit", "--outputs", str(outputs_file()), *argv])
    except SystemExit as exc:
        code = exc.code
    assert code != 0
    assert message in capsys.readouterr().err
    ml_client.return_value.jobs.create_or_update.assert_not_called()


def test_horovod_stays_the_default(outputs):
    job = build_job(outputs(), JobRequest("torch", 1, "mount", "r"))
    assert isinstance(job.distribution, MpiDistribution)
    assert job.distribution.process_count_per_instance == 8
    assert "torchrun" not in job.command and job.tags["azdl.launcher"] == "horovod"


def test_a_node_without_node_rank_stops_with_one_line(tmp_path):
    """The node's shell words as the job runs them, with Azure ML's variables but NODE_RANK:
    bash stops at the words, before anything starts."""
    import os
    import subprocess

    from azdl.envs import PACKAGES_ROOT
    from azdl.launchers import node_torchrun

    env = {k: v for k, v in os.environ.items() if k != "NODE_RANK"} | {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "AZDL_STOP_DIR": str(tmp_path),
        "PYTHONPATH": str(PACKAGES_ROOT),
    }  # fmt: skip
    run = subprocess.run(["bash", "-c", node_torchrun(2, 1, 0, "r") + " true"], env=env,
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode != 0
    assert run.stderr.strip().endswith(
        "NODE_RANK: not set: Azure ML sets it on every node of a pytorch job"
    )
