"""`azdl submit --environment NAME@VERSION`: a job on a team's own Azure ML environment, through
the user's call (the mocked MLClient, --dry-run, --export read back by azure-ai-ml's loader). The
reference is azure-ai-ml's own form (its parser reads it back); the job's command checks first
that the environment has the azdl runtime modules the command runs, and that check is run here
as a node would run it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from azure.ai.ml import load_job
from azure.ai.ml._utils._arm_id_utils import parse_prefixed_name_version

from azdl.cli import main
from azdl.jobs import own_environment

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "torchrun" / "ddp_minimal.py"


def submit(outputs_file, *extra: str) -> int:
    argv = ["submit", "--outputs", str(outputs_file()), "--script", str(SCRIPT), "--storage",
            "synthetic", "--name", "own-env-1", *extra]  # fmt: skip
    return main(argv)


def test_the_job_runs_on_the_named_environment_and_checks_its_runtime_first(
    ml_client, outputs_file
):
    assert submit(outputs_file, "--environment", "team-pytorch@3") == 0
    job = ml_client.return_value.jobs.create_or_update.call_args.args[0]
    assert job.environment == "azureml:team-pytorch:3"
    # azure-ai-ml's own reading of the reference: the name and the version, no label.
    assert parse_prefixed_name_version(job.environment) == ("team-pytorch", "3")
    assert job.tags["azdl.environment"] == "team-pytorch@3"
    probe, _, rest = job.command.partition(f" || exit {own_environment.MISSING_RUNTIME_EXIT} && ")
    assert probe.startswith("python -c ") and rest
    # Every runtime module the rest of the command runs is checked, and nothing else.
    modules = own_environment.runtime_modules(rest)
    assert "training.guard" in modules and "training.rank_output" in modules
    assert probe.split("' ", 1)[1].split() == modules


def test_without_environment_the_job_runs_on_azdls_image_with_no_check(ml_client, outputs_file):
    assert submit(outputs_file) == 0
    job = ml_client.return_value.jobs.create_or_update.call_args.args[0]
    assert job.environment.endswith("/environments/azdl-pytorch/versions/def")
    assert own_environment.MISSING_RUNTIME not in job.command
    assert "azdl.environment" not in job.tags


def test_the_export_round_trips_through_azure_ai_mls_loader(ml_client, outputs_file, tmp_path):
    out = tmp_path / "own-env.yml"
    assert submit(outputs_file, "--environment", "team-pytorch@3", "--export", str(out)) == 0
    ml_client.assert_not_called()
    assert "\nenvironment: azureml:team-pytorch:3\n" in out.read_text()
    job = load_job(out)  # the loader keeps the name and version (it drops the prefix)
    assert parse_prefixed_name_version(job.environment) == ("team-pytorch", "3")
    assert job._validate().passed
    assert job.command.startswith("python -c ")


@pytest.mark.parametrize(
    "reference", ["team", "team@", "@3", "a/b@1", "a:b@1", "team@3@4", "-x@1", "team@v 1"]
)
def test_a_bad_reference_is_one_error_line_before_anything_is_built(
    reference, ml_client, outputs_file, capsys
):
    with pytest.raises(SystemExit) as exited:
        submit(outputs_file, f"--environment={reference}", "--dry-run")
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"azdl submit: error: argument --environment: {reference!r}: expected NAME@VERSION of "
        "an Azure ML environment in the stack's workspace (e.g. team-pytorch@3): NAME a letter "
        "or digit, then letters, digits, '-', '_' or '.'; VERSION letters, digits, '-', '_' or '.'"
    )
    assert "Traceback" not in "\n".join(err)
    ml_client.assert_not_called()


def test_the_health_gate_is_refused_on_an_own_environment_and_off_by_default_with_a_note(
    ml_client, outputs_file, capsys
):
    # 2 nodes of an InfiniBand size: the gate would be on by default on azdl's image.
    refused = ["submit", "--outputs", str(outputs_file()), "--nodes", "2", "--environment",
               "team-pytorch@3", "--health-check", "--framework", "torch"]  # fmt: skip
    assert main(refused) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --health-check runs nccl-tests and perftest as azdl's images")
    assert len(err.splitlines()) == 1
    ml_client.assert_not_called()
    argv = ["submit", "--outputs", str(outputs_file()), "--nodes", "2", "--environment",
            "team-pytorch@3", "--framework", "torch"]  # fmt: skip
    assert main(argv) == 0
    job = ml_client.return_value.jobs.create_or_update.call_args.args[0]
    assert "training.health.gate" not in job.command
    assert "azdl: --environment: no health gate before training" in capsys.readouterr().err


@pytest.mark.slow  # starts Python processes, as a node runs the job's first step
def test_the_first_step_run_as_a_node_stops_in_one_line_without_the_runtime(
    ml_client, outputs_file, tmp_path
):
    assert submit(outputs_file, "--environment", "team-pytorch@3") == 0
    command = ml_client.return_value.jobs.create_or_update.call_args.args[0].command
    # The checks: the runtime's modules, then (an ND H100 v5 size) the NCCL topology file.
    probe = " && ".join(command.split(" && ")[:2])
    topology = "/opt/azdl/nccl-topology/ndv5-topo.xml"
    assert probe.endswith(f"test -f {topology} || {{ echo '{own_environment.MISSING_TOPOLOGY} "
                          f"{topology}, which NCCL needs on this VM size (docs/architecture.md, "
                          "NCCL topology files): add it as the nccl-topology step of training/"
                          "install/image-steps.sh does, or submit without --environment' >&2; "
                          "exit 78; }")  # fmt: skip
    # The job's code folder with a `training/` package of its own, which must not count.
    code = tmp_path / "code"
    (code / "training").mkdir(parents=True)
    (code / "training" / "__init__.py").write_text("")
    # `python` on the node: a plain interpreter (this one's base, without the test
    # environment's packages, where azdl is installed).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"

    def node(pythonpath: str | None, steps: str = probe) -> subprocess.CompletedProcess:
        env = {"PATH": path} | ({"PYTHONPATH": pythonpath} if pythonpath else {})
        return subprocess.run(["bash", "-c", steps], cwd=code, env=env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip

    lacking = node(None)
    assert lacking.returncode == own_environment.MISSING_RUNTIME_EXIT
    modules = ", ".join(own_environment.runtime_modules(command))
    assert lacking.stderr == (
        f"{own_environment.MISSING_RUNTIME} (missing: {modules}): install it into the "
        f"environment with {own_environment.install_hint()}, or submit without --environment\n"
    )
    having = node(str(ROOT))  # the runtime importable, as the azdl wheel installs it
    assert having.returncode == own_environment.MISSING_RUNTIME_EXIT
    assert having.stderr.startswith(f"{own_environment.MISSING_TOPOLOGY} {topology}, ")
    assert len(having.stderr.splitlines()) == 1
    # With the file where the job expects it, the checks pass.
    (tmp_path / "ndv5-topo.xml").write_text("<system/>")
    ready = node(str(ROOT), probe.replace(topology, str(tmp_path / "ndv5-topo.xml")))
    assert (ready.returncode, ready.stderr) == (0, "")


HOROVOD_SCRIPT = ROOT / "examples" / "segmentation" / "train_segmentation.py"


def test_no_safeguards_runs_the_ranks_without_the_guard_and_says_what_is_lost(
    ml_client, outputs_file, capsys
):
    argv = ["submit", "--outputs", str(outputs_file()), "--script", str(HOROVOD_SCRIPT),
            "--name", "bare-1", "--environment", "team-pytorch@3", "--no-safeguards"]  # fmt: skip
    assert main(argv) == 0
    job = ml_client.return_value.jobs.create_or_update.call_args.args[0]
    assert own_environment.runtime_modules(job.command) == []
    assert own_environment.MISSING_RUNTIME not in job.command  # nothing to check for
    # An ND H100 v5 size: NCCL's topology file is still the job's, and still checked first.
    assert job.command.startswith("test -f /opt/azdl/nccl-topology/ndv5-topo.xml || ")
    assert job.command.endswith(" && python train_segmentation.py")
    variables = job.environment_variables
    assert variables["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "600"  # Horovod's own
    assert "NCCL_DEBUG_SUBSYS" not in variables  # the guard's reading of NCCL's log
    err = capsys.readouterr().err
    assert "azdl: --no-safeguards: the job runs without azdl's guard around each rank: " in err


@pytest.mark.parametrize(
    ("extra", "script", "error"),
    [
        ([], HOROVOD_SCRIPT, "--no-safeguards goes with --environment"),
        (["--environment", "e@1"], SCRIPT, "--no-safeguards: under torchrun, azdl's runtime"),
        (["--environment", "e@1", "--storage", "copy"], HOROVOD_SCRIPT,
         "--no-safeguards: --storage copy is azdl's runtime"),
        (["--environment", "e@1", "--progress-timeout", "60"], HOROVOD_SCRIPT,
         "--no-safeguards: --progress-timeout is the guard's watchdog"),
    ],
)  # fmt: skip
def test_no_safeguards_is_refused_in_one_line_where_the_job_needs_the_runtime(
    extra, script, error, ml_client, outputs_file, capsys
):
    argv = ["submit", "--outputs", str(outputs_file()), "--script", str(script),
            "--no-safeguards", *extra]  # fmt: skip
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and err[0].startswith(f"error: {error}"), err
    ml_client.assert_not_called()
