"""The launcher follows the user's script (issue 35, traps A to C): a Horovod script starts under
Horovod, PyTorch's tutorial DDP script (env://) under torchrun, a --launcher that contradicts
the script's source is refused in one line, locally (`azdl train --script`) and for the
cluster (`azdl submit --script --export`), and a script whose launcher cannot be told gets the
default with one line saying so. Through the CLI as a user calls it; the real run of the DDP
script under the default launcher is tests/training/test_torchrun.py's."""

import textwrap
from pathlib import Path

import pytest
from azure.ai.ml import MpiDistribution, PyTorchDistribution, load_job

from azdl.cli import main
from azdl.envs import PACKAGES_ROOT
from azdl.jobs import script as own_script

# Trap A: written as PyTorch's DDP tutorial writes it (init_process_group from torchrun's env://).
DDP = PACKAGES_ROOT / "examples" / "torchrun" / "ddp_minimal.py"
# A plain Horovod script (trap B's): the segmentation example imports horovod.torch.
HOROVOD = PACKAGES_ROOT / "examples" / "segmentation" / "train_segmentation.py"

WRONG = {
    (DDP, "horovod"): "--launcher horovod does not fit ddp_minimal.py, which calls "
    "init_process_group (env://) and imports no Horovod: only torchrun sets the RANK, "
    "WORLD_SIZE and MASTER_ADDR that env:// reads; leave --launcher out (it then follows the "
    "script) or say --launcher torchrun",
    (HOROVOD, "torchrun"): "--launcher torchrun does not fit train_segmentation.py, which imports "
    "horovod.torch: under torchrun each worker would be a Horovod job of size 1, training a model "
    "of its own; leave --launcher out (it then follows the script) or say --launcher horovod",
}


def export(outputs_file, tmp_path, script: Path, *options: str) -> tuple[int, Path]:
    path = tmp_path / "job.yml"
    code = main(["submit", "--outputs", str(outputs_file()), "--script", str(script),
                 "--storage", "synthetic", *options, "--export", str(path)])  # fmt: skip
    return code, path


@pytest.mark.parametrize(("script", "launcher"), sorted(WRONG, key=str))
def test_a_launcher_the_script_contradicts_is_refused_for_the_cluster(
    outputs_file, tmp_path, capsys, script, launcher
):
    """Trap C: nothing is written, one line says why."""
    code, path = export(outputs_file, tmp_path, script, "--launcher", launcher)
    assert code == 2 and not path.exists()
    assert capsys.readouterr().err == f"error: {WRONG[script, launcher]}\n"


@pytest.mark.parametrize(("script", "launcher"), sorted(WRONG, key=str))
def test_a_launcher_the_script_contradicts_is_refused_locally(tmp_path, capsys, script, launcher):
    """Trap B (and A's converse) under `azdl train`: refused before any folder or worker."""
    run_dir = tmp_path / "run"
    code = main(["train", "--script", str(script), "--launcher", launcher,
                 "--run-dir", str(run_dir)])  # fmt: skip
    assert code == 2 and not run_dir.exists()
    assert capsys.readouterr().err == f"error: {WRONG[script, launcher]}\n"


@pytest.mark.parametrize(
    ("script", "distribution", "launcher", "why"),
    [
        (DDP, PyTorchDistribution, "torchrun",
         "ddp_minimal.py calls init_process_group (env://) and imports no Horovod"),
        (HOROVOD, MpiDistribution, "horovod", "train_segmentation.py imports horovod.torch"),
    ],
)  # fmt: skip
def test_without_a_launcher_the_job_gets_the_one_the_script_needs(
    outputs_file, tmp_path, capsys, script, distribution, launcher, why
):
    code, path = export(outputs_file, tmp_path, script)
    assert code == 0
    assert f"azdl: launcher {launcher}: {why}\n" in capsys.readouterr().err
    job = load_job(path)  # the loader `az ml job create -f` uses
    assert isinstance(job.distribution, distribution) and job.tags["azdl.launcher"] == launcher
    # Said explicitly and consistent with the script: accepted, nothing to say.
    code, path = export(outputs_file, tmp_path, script, "--launcher", launcher)
    assert code == 0 and "azdl: launcher" not in capsys.readouterr().err


def test_a_script_whose_launcher_cannot_be_told_gets_the_default_with_one_line(
    outputs_file, tmp_path, capsys
):
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.ones(1))\n")
    code, path = export(outputs_file, tmp_path, script)
    assert code == 0 and isinstance(load_job(path).distribution, MpiDistribution)
    assert capsys.readouterr().err.splitlines()[0] == (
        "azdl: launcher horovod (the default): train.py neither imports Horovod nor calls "
        "init_process_group; say --launcher torchrun for a torch.distributed script"
    )
    code, path = export(outputs_file, tmp_path, script, "--launcher", "torchrun")
    assert code == 0 and isinstance(load_job(path).distribution, PyTorchDistribution)


@pytest.mark.parametrize(
    ("source", "launcher", "why"),
    [
        ("import horovod.tensorflow.keras as hvd\nhvd.init()\n", "horovod",
         "imports horovod.tensorflow.keras"),
        ("from horovod import torch as hvd\n", "horovod", "imports horovod"),
        ("import torch.distributed as dist\ndist.init_process_group('gloo')\n", "torchrun",
         "calls init_process_group (env://) and imports no Horovod"),
        ("from torch.distributed import init_process_group as ipg\n"
         "from torch.distributed import init_process_group\n"
         "init_process_group(backend='nccl', init_method='env://')\n", "torchrun",
         "calls init_process_group (env://) and imports no Horovod"),
        ("import torch.distributed as d\nd.init_process_group('gloo', init_method='tcp://h:1')\n",
         None, "calls init_process_group with init_method='tcp://h:1'"),
        ("import horovod.torch as hvd\nimport torch.distributed as d\nd.init_process_group()\n",
         None, "imports horovod.torch and calls init_process_group"),
        ("print('hello')\n", None, "neither imports Horovod nor calls init_process_group"),
        ("def broken(:\n", None, "does not parse as Python"),
    ],
)  # fmt: skip
def test_what_the_source_says_about_its_launcher(tmp_path, source, launcher, why):
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(source))
    assert own_script.detect_launcher(script) == (launcher, why)
