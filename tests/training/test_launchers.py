"""The local launcher (`azdl train`): Horovod over Gloo via horovodrun (the other tests) and
plain mpirun (as Azure ML starts workers; two real workers of each TensorFlow flavour under it:
test_tf_training.py, the TFRecord runs), the demo's arguments, and its errors."""

import argparse

import pytest

from azdl import local
from azdl.commands import train
from azdl.errors import AzdlError
from azdl.launchers import labelled
from training import options
from training.flavours import FRAMEWORKS


def test_mpi_command_is_plain_mpirun_with_the_environment_exported():
    cmd = local.launch_command("tf", 2, "horovod", ["--epochs", "1"], transport="mpi")
    assert cmd[0].endswith("mpirun") and "horovodrun" not in " ".join(cmd)
    assert cmd[cmd.index("-np") + 1] == "2"
    assert cmd[cmd.index("PYTHONPATH") - 1] == "-x"
    assert cmd[cmd.index("HOROVOD_CYCLE_TIME") - 1] == "-x"
    assert cmd[-4:] == ["-m", "training.tensorflow.train_loop", "--epochs", "1"]


def test_local_workers_get_a_cpu_friendly_horovod_cycle_time_unless_one_is_set(monkeypatch):
    monkeypatch.delenv("HOROVOD_CYCLE_TIME", raising=False)
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.delenv("AZDL_VERBOSE", raising=False)
    env = local.local_env()
    assert env["HOROVOD_CYCLE_TIME"] == local.LOCAL_CYCLE_TIME_MS == "20"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "1"
    monkeypatch.setenv("HOROVOD_CYCLE_TIME", "5")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    env = local.local_env()
    assert (env["HOROVOD_CYCLE_TIME"], env["TF_CPP_MIN_LOG_LEVEL"]) == ("5", "0")


def test_azdl_verbose_leaves_tensorflows_log_level_alone(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setenv("AZDL_VERBOSE", "1")
    assert "TF_CPP_MIN_LOG_LEVEL" not in local.local_env()


def _parser():
    parser = argparse.ArgumentParser(prog="azdl")
    train.register(parser.add_subparsers(dest="command"))
    return parser


def test_unknown_framework_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["train", "--framework", "mxnet"])
    assert exc.value.code == 2
    assert "invalid choice: 'mxnet' (choose from 'keras', 'tf', 'torch')" in capsys.readouterr().err
    with pytest.raises(AzdlError, match="unknown framework 'mxnet'; allowed: keras, tf, torch"):
        local.launch_command("mxnet", 2, "horovod", [])
    with pytest.raises(AzdlError, match="--workers must be at least 1, got 0"):
        local.launch_command("keras", 0, "horovod", [])


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_demo_arguments_are_valid_for_every_training_script(framework):
    args = options.parse_args(framework, train.demo_args(framework, workers=2))
    assert args.model == "resnet50" and args.data_dir is None  # synthetic data
    assert "runs/demo-" in args.checkpoint_dir and args.epochs * args.steps_per_epoch <= 40


def test_torchrun_command_starts_the_workers_on_one_node_with_its_own_rendezvous():
    cmd = local.launch_command("torch", 2, "torchrun", ["--epochs", "1"], max_restarts=3)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert cmd[cmd.index("--max-restarts") + 1] == "3"
    worker = cmd[cmd.index("--no-python") + 1 :]
    label = labelled(worker[0])  # each line whole, labelled with its rank (tested below)
    assert worker[0].endswith("python") and worker[: len(label)] == label
    assert worker[len(label) + 1 :] == ["-m", "training.torch.train", "--epochs", "1"]
    guarded = local.launch_command("torch", 2, "torchrun", [], guard=["python", "-m", "g", "--"])
    after = guarded.index("--no-python") + 1 + len(label)
    assert guarded[after : after + 4] == ["python", "-m", "g", "--"]


@pytest.mark.parametrize(
    ("framework", "launcher", "options", "message"),
    [
        ("keras", "torchrun", {}, "the keras flavour runs under Horovod only"),
        ("tf", "torchrun", {}, "--launcher torchrun runs --framework torch, or your own --script"),
        ("torch", "horovod", {"max_restarts": 1}, "--max-restarts is torchrun's"),
        ("torch", "slurm", {}, "unknown launcher 'slurm'; allowed: horovod, torchrun"),
        ("torch", "horovod", {"transport": "nccl"}, "unknown transport 'nccl'; allowed: gloo, mpi"),
    ],
)
def test_a_launcher_that_cannot_start_the_flavour_is_refused(framework, launcher, options, message):
    with pytest.raises(AzdlError, match=message):
        local.launch_command(framework, 2, launcher, [], **options)


def test_a_users_script_runs_under_torchrun_whatever_its_framework(tmp_path):
    script = tmp_path / "train.py"
    cmd = local.launch_command("", 2, "torchrun", ["--x"], script=script)
    assert cmd[-2:] == [str(script), "--x"]


def test_stall_timeout_under_torchrun_is_the_built_in_scripts_collective_timeout(tmp_path):
    assert train.launcher_of(_parser().parse_args(
        ["train", "--launcher", "torchrun", "--stall-timeout", "30"]))[0] == "torchrun"  # fmt: skip
    with pytest.raises(AzdlError, match=r"your script sets its own \(init_process_group"):
        train.launcher_of(_parser().parse_args(
            ["train", "--launcher", "torchrun", "--stall-timeout", "30", "--script", "x.py"]
        ))  # fmt: skip
    guard, env = local.stall_guard(30, "torchrun", tmp_path)
    assert guard[-1] == "--" and str(tmp_path / "ranks") in guard
    assert env == {
        "AZDL_COLLECTIVE_TIMEOUT_S": "30",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/flight-recorder/rank_",
    }
    assert (tmp_path / "flight-recorder").is_dir()  # PyTorch's writer makes no folders


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--launcher", "gloo"], "'gloo' is no launcher any more: say --launcher horovod"),
        (["--launcher", "mpi"], "'mpi' is no launcher any more: say --launcher horovod "
                                "--transport mpi"),
        (["--launcher", "slurm"], "invalid choice: 'slurm' (choose from 'horovod', 'torchrun')"),
        (["--transport", "nccl"], "invalid choice: 'nccl' (choose from 'gloo', 'mpi')"),
    ],
)  # fmt: skip
def test_the_launcher_options_say_what_a_value_of_earlier_releases_is_now(capsys, argv, message):
    """One vocabulary (issue 33): --launcher horovod|torchrun, Horovod's --transport gloo|mpi."""
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["train", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_transport_goes_with_horovod_only():
    with pytest.raises(AzdlError, match="--transport mpi is Horovod's; torchrun starts its"):
        train.launcher_of(_parser().parse_args(["train", "--launcher", "torchrun",
                                                "--transport", "mpi"]))  # fmt: skip
