"""`azdl submit --script`, `--dry-run` and `--export`: the folder a job uploads (as azure-ai-ml
decides it), the command with the user's arguments, MPI process counts, and the exported YAML
read back by azure-ai-ml's own loader (`load_job`, which `az ml job create -f` uses)."""

import re
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml
from azure.ai.ml import MpiDistribution, load_job
from azure.ai.ml.exceptions import ValidationException
from job_commands import runs, unguarded
from marshmallow.exceptions import ValidationError

from azdl.cli import main
from azdl.jobs import code_folder
from azdl.jobs.export import SCHEMA_URL
from azdl.runtime import module_command

TORCH_SCRIPT = """\
import argparse
import horovod.torch as hvd
import torch

hvd.init()
"""
KERAS_SCRIPT = """\
import horovod.tensorflow.keras as hvd
import tensorflow as tf

hvd.init()
"""


@pytest.fixture
def project(tmp_path):
    """A user's project folder: a PyTorch script, a helper module, a requirements file, data
    and a virtual environment that must not be uploaded, and a .amlignore that says so."""
    root = tmp_path / "my-project"
    (root / "models").mkdir(parents=True)
    (root / "train.py").write_text(TORCH_SCRIPT)
    (root / "models" / "net.py").write_text("WIDTH = 8\n")
    (root / "requirements.txt").write_text("tinydep==1.0\n")
    (root / "wheels").mkdir()
    (root / "wheels" / "tinydep-1.0-py3-none-any.whl").write_bytes(b"PK")
    (root / "data").mkdir()
    (root / "data" / "big.bin").write_bytes(b"\0" * 1_000_000)
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "site.py").write_text("#\n")
    (root / ".amlignore").write_text("data/\n.venv/\n*.ckpt\n")
    (root / "old.ckpt").write_bytes(b"x")
    return root


def submitted(ml_client):
    create = ml_client.return_value.jobs.create_or_update
    assert create.call_count == 1
    return create.call_args.args[0]


def test_script_job_uploads_the_folder_and_runs_the_users_command_under_mpi(
    ml_client, outputs_file, project, capsys
):
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    code = main(["submit", "--outputs", str(path), "--script", str(project / "train.py"),
                 "--nodes", "2", "--name", "own-1", "--data-path", "landcover", "--no-health-check",
                 "--", "--epochs", "3", "--out={output_dir}/model", "--lr", "0.1"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    job = submitted(ml_client)
    assert Path(job.code) == project  # the script's folder is the job's code
    assert isinstance(job.distribution, MpiDistribution)
    assert job.distribution.process_count_per_instance == 8  # one per H100
    assert job.resources.instance_count == 2
    assert job.resources.shm_size == "16g"
    assert job.environment.endswith("/environments/azdl-pytorch/versions/def")  # from imports
    assert job.environment_variables["NCCL_IB_DISABLE"] == "0"
    assert job.environment_variables["OMP_NUM_THREADS"] == "12"  # 96 vCPUs / 8 processes
    export, run = unguarded(job.command).split(" && ")
    assert run == "python train.py --epochs 3 '--out=${{outputs.outputs}}/model' --lr 0.1"
    assert "AZDL_DATA_DIR='${{inputs.data}}'" in export
    assert "AZDL_CHECKPOINT_DIR='${{outputs.checkpoints}}'" in export
    assert job.inputs["data"].path == "azureml://datastores/azdl_training_data/paths/landcover/"
    assert set(job.outputs) == {"checkpoints", "logs", "outputs"}
    assert (
        job.outputs["outputs"].path == "azureml://datastores/azdl_outputs/paths/azdl/own-1/outputs/"
    )


def test_the_upload_list_is_azure_ai_mls_own_honouring_amlignore_then_gitignore(project):
    files = set(code_folder.scan(project).files)
    assert {"train.py", "models/net.py", "requirements.txt", ".amlignore"} <= files
    assert not any(f.startswith(("data/", ".venv/")) or f.endswith(".ckpt") for f in files)
    # Without .amlignore azure-ai-ml falls back to .gitignore; with neither, everything goes.
    (project / ".amlignore").unlink()
    (project / ".gitignore").write_text(".venv/\n")
    files = set(code_folder.scan(project).files)
    assert "data/big.bin" in files and not any(f.startswith(".venv/") for f in files)


def test_a_folder_above_azure_mls_snapshot_limit_is_refused_naming_the_biggest_entries(
    ml_client, outputs_file, project, capsys
):
    many = project / "tiles"
    many.mkdir()
    for i in range(code_folder.MAX_FILES + 1):  # the documented limit: 2000 files
        (many / f"{i}.png").touch()
    argv = ["submit", "--outputs", str(outputs_file()), "--script", str(project / "train.py")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"code folder {project} is too large" in err
    assert "2000 files, 300.0 MB)" in err and "Biggest entries: tiles/ (2001 files, 0.0 MB)" in err
    assert ".amlignore" in err
    ml_client.assert_not_called()


@pytest.mark.parametrize(
    ("setup", "extra", "message"),
    [
        (lambda p: (p / ".amlignore").write_text("train.py\n"), [], "is left out of the upload by"),
        (lambda p: None, ["--code", "TMP/elsewhere"], "no such folder"),
        (lambda p: None, ["--wheels", "PROJECT/wheels"], "--wheels needs --requirements"),
        (lambda p: None, ["--storage", "synthetic", "--", "--data", "{data_dir}"],
         "the script arguments use {data_dir}, but this run has no such folder"),
        (lambda p: (p / "train.py").write_text("print('no framework')\n"), [],
         "can't tell from train.py's imports"),
    ],
)  # fmt: skip
def test_bad_script_jobs_fail_before_azure_is_contacted(
    ml_client, outputs_file, project, capsys, setup, extra, message
):
    setup(project)
    extra = [e.replace("TMP", str(project.parent)).replace("PROJECT", str(project)) for e in extra]
    argv = ["submit", "--outputs", str(outputs_file()), "--script", str(project / "train.py")]
    assert main([*argv, *extra]) == 2
    assert message in capsys.readouterr().err
    ml_client.assert_not_called()


def test_requirements_from_pypi_on_a_subnet_that_denies_the_internet_are_refused(
    ml_client, outputs_file, project, capsys
):
    """network.outbound: restricted ends in a deny-all (Azure ML's documented list only), so
    pip could not reach PyPI on the nodes: refused before anything is uploaded, naming --wheels."""
    argv = ["submit", "--outputs", str(outputs_file(trainingOutbound="restricted")),
            "--script", str(project / "train.py"),
            "--requirements", str(project / "requirements.txt")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "without --wheels" in err and "denies the internet" in err and "--wheels" in err
    ml_client.assert_not_called()
    # open outbound, or a stack that does not say (older outputs, a landing zone): allowed
    for extra in ({"trainingOutbound": "open"}, {}, {"trainingOutbound": None}):
        argv[2] = str(outputs_file(**extra))
        assert main([*argv, "--dry-run"]) == 0, extra


def test_requirements_install_once_per_node_from_the_wheel_folder_only(outputs, project):
    from azdl.jobs.request import JobRequest, OwnScript
    from azdl.jobs.spec import build_job

    script = OwnScript(
        project / "train.py", project, project / "requirements.txt", project / "wheels"
    )
    job = build_job(outputs(), JobRequest("torch", 1, "copy", "r", ("--x",), script=script))
    steps = unguarded(job.command).split(" && ")
    assert "--no-index --find-links wheels -r requirements.txt" in steps[1]
    assert 'if [ "${OMPI_COMM_WORLD_LOCAL_RANK' in steps[1]  # local rank 0 installs
    # then each process copies its node's shards right before it trains, as built-ins do
    assert steps[-2].startswith(runs("training.data.copy_shards"))
    assert steps[-1] == "python train.py --x"


def load_exported(path: Path):
    """azure-ai-ml's loader on the file, as `az ml job create -f` reads it."""
    return load_job(path)


def test_export_writes_cli_v2_yaml_that_azure_ai_mls_loader_accepts(
    ml_client, outputs_file, project, tmp_path, capsys
):
    out = tmp_path / "jobs" / "own.yml"
    argv = ["submit", "--outputs", str(outputs_file()), "--script", str(project / "train.py"),
            "--nodes", "3", "--name", "own-2", "--export", str(out),
            "--", "--epochs", "2"]  # fmt: skip
    assert main(argv) == 0
    ml_client.assert_not_called()  # export only: nothing submitted
    text = out.read_text()
    assert text.startswith(f"$schema: {SCHEMA_URL}\n")
    assert yaml.safe_load(text)["code"] == "../my-project"  # relative to the YAML file
    job = load_exported(out)
    assert (Path(job._base_path) / job.code).resolve() == project
    assert job.command.endswith("python train.py --epochs 2")
    assert job.distribution.process_count_per_instance == 8
    assert job.resources.instance_count == 3
    assert job.environment.endswith("/environments/azdl-pytorch/versions/def")
    assert job.identity.client_id == "client-id-1"
    assert job.outputs["outputs"].path.endswith("/azdl/own-2/outputs/")
    assert job._validate().passed


@pytest.mark.parametrize("storage", ["mount", "nfs", "copy", "synthetic"])
def test_built_in_jobs_export_too_and_round_trip_every_setting(
    ml_client, outputs_file, tmp_path, storage
):
    out = tmp_path / f"{storage}.yml"
    argv = ["submit", "--outputs", str(outputs_file()), "--storage", storage, "--nodes", "2",
            "--name", "b1", "--export", str(out), "--", "--epochs", "5"]  # fmt: skip
    assert main(argv) == 0
    job = load_exported(out)
    assert job.code is None
    assert "python -m training.tensorflow.train_keras --epochs 5 " in job.command
    assert job.distribution.process_count_per_instance == 8
    assert job.resources.instance_count == 2 and job.resources.shm_size == "16g"
    assert job.environment_variables["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    if storage == "nfs":  # a list of docker arguments, as built (not its Python repr)
        flag, volume = job.resources.docker_args
        assert flag == "--mount" and "volume-opt=type=nfs" in volume
    assert job._validate().passed


def test_the_loader_really_checks_what_it_reads(ml_client, outputs_file, tmp_path):
    """Negative control: azure-ai-ml's loader refuses a broken version of an exported file."""
    out = tmp_path / "job.yml"
    assert main(["submit", "--outputs", str(outputs_file()), "--export", str(out)]) == 0
    document = yaml.safe_load(out.read_text())
    document["distribution"]["process_count_per_instance"] = "eight"
    out.write_text(yaml.safe_dump(document))
    with pytest.raises((ValidationError, ValidationException)):
        load_exported(out)


def test_dry_run_prints_the_same_yaml_and_nothing_is_sent(
    ml_client, outputs_file, project, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(project)
    argv = ["submit", "--outputs", str(outputs_file()), "--script", "train.py", "--name", "d1"]
    assert main([*argv, "--dry-run", "--", "--epochs", "1"]) == 0
    ml_client.assert_not_called()
    out = capsys.readouterr().out
    header, body = out.split("\n", 1)
    assert "as Azure ML CLI v2 YAML, built locally; nothing was sent" in header
    document = yaml.safe_load(body)
    assert document["$schema"] == SCHEMA_URL and document["code"] == "."
    assert document["command"].endswith("python train.py --epochs 1")
    (project / "job.yml").write_text(body)
    assert load_exported(project / "job.yml")._validate().passed


def test_script_jobs_framework_comes_from_imports_or_the_option(ml_client, outputs_file, project):
    (project / "train.py").write_text(textwrap.dedent(KERAS_SCRIPT))
    assert main(["submit", "--outputs", str(outputs_file()), "--script",
                 str(project / "train.py")]) == 0  # fmt: skip
    assert submitted(ml_client).environment.endswith("/azdl-tensorflow/versions/abc")
    ml_client.reset_mock()
    assert main(["submit", "--outputs", str(outputs_file()), "--script", str(project / "train.py"),
                 "--framework", "torch"]) == 0  # fmt: skip
    assert submitted(ml_client).environment.endswith("/azdl-pytorch/versions/def")


@pytest.mark.parametrize("own", [False, True])
def test_resume_from_points_the_checkpoints_at_the_earlier_jobs_folder(
    ml_client, outputs_file, project, tmp_path, own
):
    script = ["--script", str(project / "train.py")] if own else []
    out = tmp_path / "job.yml"
    argv = ["submit", "--outputs", str(outputs_file()), *script, "--name", "seg-2",
            "--resume-from", "seg-1", "--export", str(out)]  # fmt: skip
    assert main(argv) == 0
    job = load_exported(out)
    assert job.outputs["checkpoints"].path.endswith("/paths/azdl/seg-1/checkpoints/")
    assert job.outputs["logs"].path.endswith("/paths/azdl/seg-2/logs/")  # the rest: its own
    assert job.tags["azdl.resume_from"] == "seg-1"


def test_resume_from_takes_a_job_name_only(ml_client, outputs_file, capsys):
    argv = ["submit", "--outputs", str(outputs_file()), "--resume-from", "../other/checkpoints"]
    assert main(argv) == 2
    assert "expected the name of an earlier job" in capsys.readouterr().err
    ml_client.assert_not_called()


@pytest.mark.parametrize("launcher", ["horovod", "torchrun"])
def test_a_script_job_starts_none_of_azdls_modules_with_python_m(
    ml_client, outputs_file, project, tmp_path, launcher
):
    """`python -m MODULE` puts the working directory, here the uploaded code folder, first on
    sys.path, where a user's own `training/` package shadows azdl's (issue 35, trap D): every
    module azdl starts in such a job goes through azdl.runtime instead; what that does in a
    shadowing folder is tested by running an exported command (tests/training/
    test_own_script.py)."""
    (project / "train.py").write_text("import torch\n")  # runs under either launcher
    path = tmp_path / "job.yml"
    assert main(["submit", "--outputs", str(outputs_file()), "--script", str(project / "train.py"),
                 "--launcher", launcher, "--nodes", "2", "--health-check", "--storage", "copy",
                 "--requirements", str(project / "requirements.txt"),
                 "--wheels", str(project / "wheels"), "--export", str(path)]) == 0  # fmt: skip
    command = load_job(path).command
    assert not re.search(r"python3? -m ", command), command
    # Its words, a worker's `bash -c SCRIPT` (torchrun with the copy step) split as well, and
    # a command substitution's module (a torchrun node's address), read from the text: shlex
    # takes `"$(...)"` for a double-quoted string and strips the quotes inside it.
    words = shlex.split(command)
    for i in [i for i in range(len(words) - 2) if words[i : i + 2] == ["bash", "-c"]]:
        words += shlex.split(words[i + 2])
    runtime = shlex.join(module_command("")[:3])
    for inner in re.findall(rf"\$\({re.escape(runtime)} ([\w.]+)\)", command):
        words += [*module_command("")[:3], inner]
    started = {
        words[i + 3] for i in range(len(words) - 3) if words[i : i + 3] == module_command("")[:3]
    }
    expected = {"training.events", "training.health.gate", "pip", "training.data.copy_shards",
                "training.guard"}  # fmt: skip
    torchrun = {"training.rank_output", "training.flight_recorder", "training.job_stop",
                "training.node_address"}  # fmt: skip
    assert started == expected | (torchrun if launcher == "torchrun" else set())


@pytest.mark.parametrize(
    ("own_package", "warned"),
    [
        ({"__init__.py": ""}, True),  # a regular package: found first, has no metrics
        ({"__init__.py": "", "metrics.py": ""}, False),  # it has one of its own
        ({"model.py": ""}, False),  # no __init__.py: a namespace portion, azdl's package wins
        ({}, False),
    ],
)  # fmt: skip
def test_a_script_that_wants_azdls_module_beside_a_training_package_of_its_own_is_warned(
    outputs_file, tmp_path, capsys, own_package, warned
):
    """After azdl.runtime, a user's `training/` package shadows only what the script itself
    imports from azdl's (training.metrics, as the segmentation example does): one line says so
    before the job is written."""
    (tmp_path / "code").mkdir()
    script = tmp_path / "code" / "train.py"
    script.write_text("import horovod.torch as hvd\nfrom training import metrics\n")
    for name, text in own_package.items():
        (tmp_path / "code" / "training").mkdir(exist_ok=True)
        (tmp_path / "code" / "training" / name).write_text(text)
    assert main(["submit", "--outputs", str(outputs_file()), "--script", str(script),
                 "--storage", "synthetic", "--export", str(tmp_path / "j.yml")]) == 0  # fmt: skip
    line = (
        "warning: train.py imports training.metrics from azdl's runtime, but its folder has a "
        "training/ package of its own, which it finds first and which has no such module: the "
        "job would stop at that import; rename your package (azdl's own steps are not affected)"
    )
    assert (line in capsys.readouterr().err.splitlines()) == warned
