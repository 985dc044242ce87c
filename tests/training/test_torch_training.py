"""PyTorch training with real Horovod workers (2 processes on this machine, Gloo and MPI).

The averaging runs use the tiny model (no batch norm), plain data and the global-batch LR
scaling, so 2 workers × batch b, 1 worker × batch 2b and 1 worker × b with 2 accumulated
micro-batches are the same computation: their final weights must agree to float rounding.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from mlflow_run import TORCH_ARGS, check_run, run_env
from worker_runs import TINY, Run, launch, write_tiny_tfrecords

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.local import launch_command
from training.throughput import FIELDS, SCHEMA, parse_throughput_lines

pytestmark = pytest.mark.slow

EPOCHS, STEPS = 3, 5
SGD = ["--lr-decay", "none", "--base-lr", "4", "--timing-warmup-steps", "2"]


def _weights(directory, rank=0) -> dict[str, np.ndarray]:
    with np.load(directory / f"rank-{rank}.npz") as npz:
        return {k: npz[k] for k in npz.files}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch-synthetic")
    common = [*TINY, *SGD, "--epochs", EPOCHS, "--steps-per-epoch", STEPS]
    outputs = ["--dump-weights", root / "two", "--checkpoint-dir", root / "ckpt"]
    outputs += ["--log-dir", root / "tb", "--val-steps", 2]
    two = [*common, "--batch-size", 8, *outputs, *TORCH_ARGS]
    runs = {
        "two": launch("torch", 2, two, env=run_env(root)),
        "one": launch("torch", 1, [*common, "--batch-size", 16, "--dump-weights", root / "one"]),
        "accum": launch(
            "torch",
            1,
            [*common, "--batch-size", 8, "--grad-accum", 2, "--dump-weights", root / "accum"],
        ),
    }
    for name, run in runs.items():
        assert run.returncode == 0, f"{name}:\n{run.output}"
    return root, runs


def test_loss_goes_down_on_synthetic_data(synthetic):
    _, runs = synthetic
    losses = runs["two"].losses()
    assert len(losses) == EPOCHS, runs["two"].output
    assert losses[-1] < 0.5 * losses[0], losses
    assert "val_accuracy: " in runs["two"].output


def test_rank0_prints_the_throughput_contract(synthetic):
    _, runs = synthetic
    output = runs["two"].output
    (record,) = parse_throughput_lines(output)  # rank 0 only
    assert tuple(record) == FIELDS and record["schema"] == SCHEMA
    assert record["framework"] == "torch" and record["model"] == "tiny"
    assert record["workers"] == 2 and record["batch_per_worker"] == 8
    assert record["data_source"] == "synthetic" and record["precision"] == "fp32"
    assert record["timed_steps"] == EPOCHS * STEPS - 2
    assert record["images_timed"] == record["timed_steps"] * 16 and record["grad_accum"] == 1
    assert record["images_per_sec"] > 0
    assert "Total images/sec: " in output
    (accum,) = parse_throughput_lines(runs["accum"].output)
    assert accum["timed_steps"] == EPOCHS * STEPS - 2  # optimizer steps, not micro-batches
    assert accum["images_timed"] == accum["timed_steps"] * 16  # 8 images × 2 micro-batches
    assert accum["grad_accum"] == 2


def test_all_ranks_hold_identical_weights(synthetic):
    root, _ = synthetic
    rank0, rank1 = _weights(root / "two", 0), _weights(root / "two", 1)
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)


def test_two_workers_equal_one_worker_with_double_batch_or_accumulation(synthetic):
    import torch

    from training.torch.torch_models import build_model

    root, _ = synthetic
    torch.manual_seed(0)  # the scripts' default --seed: the weights every run starts from
    initial = {k: v.numpy() for k, v in build_model("tiny", 4).state_dict().items()}
    two, one, accum = (_weights(root / name) for name in ("two", "one", "accum"))
    moved = max(np.abs(two[k] - initial[k]).max() for k in initial)
    assert moved > 1e-2  # the weights really changed, so agreement below means something
    for name in initial:
        # Two workers of 8 and 2 micro-batches of 8 average the same two batch-8 gradients.
        np.testing.assert_allclose(two[name], accum[name], rtol=1e-4, atol=2e-5, err_msg=name)
        # One batch of 16 sums in another order: fp32 rounding (~1e-7), grown over 15 steps
        # at lr 4, reached 3.4e-4 on a 2-core Xeon (torch 2.13 CPU, 2026-11-26). A wrong
        # average (sum, or one worker's gradient) is off by the size of the step itself, so
        # the bound is 1% of how far the tensor moved.
        travelled = np.abs(one[name] - initial[name]).max()
        off = np.abs(two[name] - one[name]).max()
        assert off <= 0.01 * travelled, f"{name}: {off:.2e} apart, moved {travelled:.2e}"


@pytest.mark.training_env
def test_the_two_worker_run_logged_each_metric_once_per_epoch_from_rank_0(synthetic):
    root, runs = synthetic
    check_run(root, "torch", EPOCHS, runs["two"])


def test_rank0_checkpoints_and_logs(synthetic):
    root, runs = synthetic
    progress = json.loads((root / "ckpt" / "progress.json").read_text())
    assert progress["epoch"] == EPOCHS and progress["global_step"] == EPOCHS * STEPS
    assert (progress["framework"], progress["model"]) == ("torch", "tiny")
    assert sorted(p.name for p in (root / "ckpt").glob("ckpt-*")) == [
        "ckpt-00002.pt",
        "ckpt-00003.pt",
    ]  # --keep-checkpoints 2
    assert f"Checkpoint: {root / 'ckpt' / 'ckpt-00003.pt'}" in runs["two"].output
    assert list((root / "tb").glob("events.out.tfevents.*"))


def test_resnet50_under_mpirun_with_every_speed_option(tmp_path):
    """The real model, launched the way Azure ML launches it: bf16 autocast, channels-last,
    fp16 allreduce and 2 accumulated micro-batches."""
    run = launch(
        "torch",
        2,
        [
            "--model", "resnet50", "--image-size", 32, "--num-classes", 10, "--batch-size", 2,
            "--grad-accum", 2, "--precision", "bf16", "--channels-last", "--fp16-allreduce",
            "--epochs", 1, "--steps-per-epoch", 2, "--timing-warmup-steps", 1,
            "--dump-weights", tmp_path,
        ],
        transport="mpi",
    )  # fmt: skip
    assert run.returncode == 0, run.output
    (record,) = parse_throughput_lines(run.output)
    assert (record["model"], record["precision"], record["workers"]) == ("resnet50", "bf16", 2)
    assert record["timed_steps"] == 1 and record["images_timed"] == 8
    rank0, rank1 = _weights(tmp_path, 0), _weights(tmp_path, 1)
    assert len([k for k in rank0 if k.endswith("conv2.weight")]) == 16  # 3 + 4 + 6 + 3 blocks
    # Parameters are averaged; BatchNorm's running statistics are each worker's own.
    for name in (k for k in rank0 if not k.endswith(("running_mean", "running_var", "tracked"))):
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)


TF_BLOCKER = """
import importlib.machinery
import sys


class NoTensorFlow(importlib.machinery.PathFinder):
    \"\"\"The path finder, blind to TensorFlow: `import tensorflow` fails and `find_spec`
    answers None, as in the PyTorch image, which has none.\"\"\"

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] == "tensorflow":
            return None
        return super().find_spec(name, path, target)


sys.meta_path[:] = [
    NoTensorFlow if f is importlib.machinery.PathFinder else f for f in sys.meta_path
]
"""


def test_tfrecords_train_and_validate_with_tensorflow_unimportable(tmp_path):
    # One validation shard for 2 workers: rank 1 evaluates nothing, rank 0 all 24 images.
    data = write_tiny_tfrecords(tmp_path / "data", validation_shards=1)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(TF_BLOCKER)  # runs first in every worker
    check = subprocess.run(
        [sys.executable, "-c", "import tensorflow"],
        env=training_env({"PYTHONPATH": f"{blocker}{os.pathsep}{PACKAGES_ROOT}"}),
        capture_output=True,
        text=True,
    )
    assert "No module named 'tensorflow'" in check.stderr  # the blocker works
    sgd = ["--lr-decay", "none", "--base-lr", "1", "--timing-warmup-steps", "2"]
    args = [*TINY, *sgd, "--data-dir", data, "--batch-size", 8, "--epochs", 5]
    args += ["--data-workers", 1, "--log-dir", tmp_path / "tb"]
    proc = subprocess.run(
        launch_command("torch", 2, "horovod", [str(a) for a in args]),
        cwd=PACKAGES_ROOT,
        env=training_env({"PYTHONPATH": f"{blocker}{os.pathsep}{PACKAGES_ROOT}"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=240,
    )
    run = Run(proc.returncode, proc.stdout)
    assert run.returncode == 0, run.output
    losses = run.losses()
    assert len(losses) == 5 and losses[-1] < 0.8 * losses[0], run.output
    accuracies = run.metric("val_accuracy")
    assert len(accuracies) == 5, run.output
    # Correct / seen over both workers: a multiple of 1/24.
    for accuracy in accuracies:
        assert abs(accuracy * 24 - round(accuracy * 24)) < 0.01, accuracies
    (record,) = parse_throughput_lines(run.output)
    assert record["data_source"] == "tfrecord" and record["workers"] == 2
    # 48 training images / (8 × 2) = 3 steps per epoch, counted from the shards.
    assert record["timed_steps"] == 5 * 3 - 2
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_bad_input_ends_in_a_clear_error_and_exit_code_2(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "training.torch.train", *TINY, "--data-dir", str(tmp_path / "no")],
        cwd=PACKAGES_ROOT,
        env=training_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert f"error: data directory {str(tmp_path / 'no')!r} does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
        (["--model", "resnet18"], "--model: invalid choice: 'resnet18'"),
        (["--precision", "fp8"], "--precision: invalid choice: 'fp8'"),
    ],
)
def test_bad_options_are_refused(argv, message, capsys):
    from training.torch.train import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return write_tiny_tfrecords(tmp_path_factory.mktemp("torch-data"), per_shard=8)


def _data(argv, rank=0, size=1):
    import torch

    from training.options import parse_args
    from training.torch.train import Data

    args = parse_args("torch", [*TINY, "--batch-size", "4", *map(str, argv)])
    return Data(args, rank, size, 1, torch.device("cpu"))


def test_data_errors_name_the_problem(tmp_path, tiny_data):
    from training.errors import TrainingError

    (tmp_path / "empty").mkdir()
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for shard in tiny_data.iterdir():
        (corrupt / shard.name).write_bytes(shard.read_bytes())
    bad_shard = corrupt / "train-00001-of-00002"
    blob = bytearray(bad_shard.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    bad_shard.write_bytes(bytes(blob))

    cases = [
        (["--data-dir", tmp_path / "missing"], 1, "does not exist"),
        (["--data-dir", tmp_path / "empty"], 1, "no train shards in"),
        (["--data-dir", tiny_data], 3, "3 workers but only 2 shard(s)"),
    ]
    for argv, workers, message in cases:
        with pytest.raises(TrainingError) as error:
            _data(argv, size=workers)
        assert message in str(error.value), argv

    # Record checksums are checked as records are read: within the first pass.
    for argv, message in [
        (["--data-dir", corrupt], f"corrupt TFRecord file {str(bad_shard)!r}"),
        (["--data-dir", tiny_data, "--num-classes", 2], "not a class index: label 2"),
    ]:
        data = _data(argv)
        with pytest.raises(TrainingError, match=re.escape(message)):
            for _ in range(4):
                next(data.train)


def test_tfrecords_decode_in_this_workers_share_of_processes(tiny_data):
    import os

    data = _data(["--data-dir", tiny_data, "--grad-accum", 2])
    assert data._records.workers == len(os.sched_getaffinity(0))
    assert data._records.decode == "cpu"  # no GPU here
    assert _data(["--data-dir", tiny_data, "--data-workers", 0])._records.workers == 0
    # 16 training images, 4 per micro-batch, 2 micro-batches a step: 2 optimizer steps a pass.
    assert data.steps_per_epoch == 2


def test_ranks_without_a_validation_shard_evaluate_nothing(tmp_path):
    data = write_tiny_tfrecords(tmp_path / "data", validation_shards=1, per_shard=8)
    seen = [
        sum(len(labels) for _, labels in _data(["--data-dir", data], rank, 2).validation())
        for rank in (0, 1)
    ]
    assert seen == [8, 0]


def test_each_worker_takes_a_gpu_it_can_see(monkeypatch):
    """One GPU per worker by local rank, modulo the GPUs visible: with CUDA_VISIBLE_DEVICES
    set per worker, every worker sees one GPU, its device 0."""
    import torch

    from training.torch.distributed import worker_device

    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    for visible, local_rank, index in [(1, 3, 0), (4, 3, 3), (4, 5, 1)]:
        monkeypatch.setattr(torch.cuda, "device_count", lambda n=visible: n)
        assert worker_device(local_rank) == torch.device("cuda", index)
        assert chosen[-1] == index


@pytest.fixture
def one_worker(monkeypatch, request):
    """One real worker of either launcher in this process: Horovod without a launcher, or a
    torch.distributed process group of one (torchrun's variables set by hand, Gloo)."""
    import socket

    from training.torch import distributed

    if request.param == "horovod":
        yield distributed.Horovod()
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                        "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    workers = distributed.TorchDistributed()
    yield workers
    workers.close()


@pytest.mark.parametrize("one_worker", ["horovod", "torchrun"], indirect=True)
def test_a_step_leaves_its_figures_on_the_device(monkeypatch, one_worker):
    """No host sync inside Trainer.step, under either launcher (Horovod's optimizer, or DDP):
    reading a tensor's value (item, tolist, float) during the step fails this test, and the
    step's loss and accuracy come back as a tensor, read by the loop only where it must (the
    timed window's ends, the progress bar's readings)."""
    import torch

    from training.options import parse_args
    from training.torch.train import Trainer

    args = parse_args("torch", ["--model", "tiny", "--image-size", "32", "--num-classes", "4",
                                "--batch-size", "4", "--grad-accum", "2"])  # fmt: skip
    trainer = Trainer(args, one_worker)
    batch = (torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3]))

    def host_sync(*_args, **_kwargs):
        raise AssertionError("Trainer.step read a tensor's value on the host")

    for name in ("item", "tolist", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, host_sync)
    result = trainer.step(iter([batch, batch]))
    monkeypatch.undo()
    assert isinstance(result, torch.Tensor) and result.shape == (2,)
    loss, accuracy = result.tolist()
    assert loss > 0 and 0 <= accuracy <= 1
