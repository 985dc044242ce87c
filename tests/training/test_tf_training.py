"""Keras and TF-loop training with real Horovod workers (2 processes on this machine).

Each flavour runs twice on the same synthetic data: 2 workers × batch 8 and 1 worker × batch 16
(Keras also 1 worker × batch 8 × 2 accumulated micro-batches). Plain SGD, no batch norm (the
tiny model) and the global-batch LR scaling make the runs mathematically identical, so their
final weights must agree to float rounding.
"""

import json

import numpy as np
import pytest
from mlflow_run import check_run, run_env
from worker_runs import TINY, launch, write_tiny_tfrecords

from training.throughput import FIELDS, SCHEMA, parse_throughput_lines

pytestmark = pytest.mark.slow

EPOCHS, STEPS = 3, 4
SGD = ["--momentum", "0", "--lr-decay", "none", "--base-lr", "16", "--timing-warmup-steps", "2"]


def _weights(directory, rank):
    with np.load(directory / f"rank-{rank}.npz") as npz:
        return [npz[k] for k in sorted(npz.files)]


@pytest.fixture(scope="module", params=["keras", "tf"])
def synthetic(request, tmp_path_factory):
    framework = request.param
    root = tmp_path_factory.mktemp(f"synthetic-{framework}")
    common = [*TINY, *SGD, "--epochs", EPOCHS, "--steps-per-epoch", STEPS]
    two = launch(
        framework,
        2,
        [
            *common,
            "--batch-size", 8, "--val-steps", 2, "--dump-weights", root / "two",
            "--checkpoint-dir", root / "ckpt", "--log-dir", root / "tb",
        ],
        env=run_env(root),
    )  # fmt: skip
    assert two.returncode == 0, two.output
    one = launch(framework, 1, [*common, "--batch-size", 16, "--dump-weights", root / "one"])
    assert one.returncode == 0, one.output
    if framework == "keras":
        accum = [*common, "--batch-size", 8, "--grad-accum", 2, "--dump-weights", root / "accum"]
        run = launch(framework, 1, accum)
        assert run.returncode == 0, run.output
    return framework, root, two, one


def test_loss_goes_down_on_synthetic_data(synthetic):
    _, _, two, _ = synthetic
    losses = two.losses()
    assert len(losses) == EPOCHS, two.output
    assert losses[-1] < 0.8 * losses[0], losses


def test_rank0_prints_the_throughput_contract(synthetic):
    framework, _, two, _ = synthetic
    (record,) = parse_throughput_lines(two.output)
    assert tuple(record) == FIELDS and record["schema"] == SCHEMA
    assert record["framework"] == framework and record["workers"] == 2
    assert record["data_source"] == "synthetic" and record["batch_per_worker"] == 8
    assert record["timed_steps"] == EPOCHS * STEPS - 2
    assert record["images_timed"] == record["timed_steps"] * 16 and record["grad_accum"] == 1
    assert record["images_per_sec"] > 0
    assert 0 < record["timed_span_s"] <= record["wall_time_s"]
    assert "Total images/sec: " in two.output
    assert two.output.count('"schema": "azdl.throughput/v1"') == 1  # rank 0 only


def test_all_ranks_hold_identical_weights(synthetic):
    _, root, _, _ = synthetic
    for w0, w1 in zip(_weights(root / "two", 0), _weights(root / "two", 1), strict=True):
        np.testing.assert_array_equal(w0, w1)


def test_two_workers_equal_one_worker_with_double_batch(synthetic):
    framework, root, _, _ = synthetic
    two, one = _weights(root / "two", 0), _weights(root / "one", 0)
    moved = max(np.abs(a - b).max() for a, b in zip(two, _initial_weights(root), strict=True))
    assert moved > 1e-2  # the weights really changed, so agreement below means something
    others = [one, _weights(root / "accum", 0)] if framework == "keras" else [one]
    for other in others:
        for a, b in zip(two, other, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)


def _initial_weights(root):
    """The untrained tiny model's weights (the same seed every run uses)."""
    import tensorflow as tf

    from training.tensorflow.keras_models import build_model

    tf.keras.utils.set_random_seed(0)
    return [w.numpy() for w in build_model("tiny", 32, 4).weights]


@pytest.mark.training_env
def test_the_two_worker_run_logged_each_metric_once_per_epoch_from_rank_0(synthetic):
    framework, root, two, _ = synthetic
    check_run(root, framework, EPOCHS, two)


def test_rank0_writes_checkpoints_and_tensorboard(synthetic):
    _, root, two, _ = synthetic
    progress = json.loads((root / "ckpt" / "progress.json").read_text())
    assert progress["epoch"] == EPOCHS and progress["global_step"] == EPOCHS * STEPS
    assert f"Checkpoint: {root / 'ckpt' / progress['checkpoint']}" in two.output
    assert list((root / "tb").rglob("events.out.tfevents.*"))


@pytest.mark.parametrize("framework", ["keras", "tf"])
def test_trains_on_a_tiny_tfrecord_set_under_plain_mpirun(framework, tmp_path):
    """Under plain mpirun, as Azure ML starts MPI workers (the other runs here: horovodrun)."""
    # One validation shard for 2 workers: rank 1 evaluates nothing, rank 0 all 24 images.
    data = write_tiny_tfrecords(tmp_path / "data", validation_shards=1)
    # Normalised JPEG pixels are larger than the synthetic ones: a gentler rate (0.25).
    args = [*TINY, *SGD, "--base-lr", 4, "--batch-size", 8, "--epochs", 4, "--data-dir", data]
    run = launch(framework, 2, [*args, "--shuffle-buffer", 64], transport="mpi")
    assert run.returncode == 0, run.output
    (record,) = parse_throughput_lines(run.output)
    assert record["data_source"] == "tfrecord" and record["workers"] == 2
    # 48 training images / (8 × 2) = 3 steps per epoch, counted from the shards.
    assert record["timed_steps"] == 4 * 3 - 2
    losses = run.losses()
    assert len(losses) == 4 and losses[-1] < 0.7 * losses[0], losses
    accuracies = run.metric("val_accuracy")
    assert len(accuracies) == 4, run.output
    # Correct / seen over both workers: a multiple of 1/24 (a mean over ranks would not be).
    for accuracy in accuracies:
        assert abs(accuracy * 24 - round(accuracy * 24)) < 0.01, accuracies


@pytest.mark.parametrize("framework", ["keras", "tf"])
def test_every_speed_option_together(framework, tmp_path):
    # The tiny model: ResNet50 with XLA takes minutes to compile on 2 cores (it runs in the
    # demo and the benchmarks).
    timeline = tmp_path / "timeline.json"
    args = [*TINY, "--batch-size", 4, "--epochs", 1, "--steps-per-epoch", 3]
    args += ["--timing-warmup-steps", 1]
    args += ["--precision", "bf16", "--xla", "--fp16-allreduce", "--horovod-timeline", timeline]
    accum = 2 if framework == "keras" else 1
    args += ["--grad-accum", accum] if framework == "keras" else []
    run = launch(framework, 2, args)
    assert run.returncode == 0, run.output
    (record,) = parse_throughput_lines(run.output)
    assert record["precision"] == "bf16" and record["grad_accum"] == accum
    assert record["timed_steps"] == 3 - 1  # optimizer steps in every flavour
    assert record["images_timed"] == 2 * 4 * accum * 2
    assert '"name": "ALLREDUCE"' in timeline.read_text()
