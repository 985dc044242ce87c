"""Unit tests of the stdlib-only shared training modules: shards, throughput, schedule,
checkpoints, options, synthetic source."""

import json

import numpy as np
import pytest

from training import checkpoints, options, schedule, throughput
from training.data import shards, synthetic
from training.data.imagenet import IMAGENET_TRAIN_IMAGES
from training.errors import TrainingError


def _touch(directory, *names):
    for name in names:
        (directory / name).write_bytes(b"")


def test_list_shards_sorted_and_filtered_by_split(tmp_path):
    _touch(tmp_path, "train-00001-of-00002", "train-00000-of-00002", "validation-00000-of-00001")
    _touch(tmp_path, "manifest.json", "train-0-of-2", "train-00002-of-00002.tmp")
    got = shards.list_shards(tmp_path, "train")
    assert [p.rsplit("/", 1)[1] for p in got] == ["train-00000-of-00002", "train-00001-of-00002"]
    assert len(shards.list_shards(tmp_path, "validation")) == 1


def test_list_shards_errors_name_the_problem(tmp_path):
    with pytest.raises(TrainingError, match="does not exist"):
        shards.list_shards(tmp_path / "missing", "train")
    _touch(tmp_path, "validation-00000-of-00001")
    with pytest.raises(TrainingError, match=r"no train shards .*train-00000-of-01024"):
        shards.list_shards(tmp_path, "train")
    with pytest.raises(TrainingError, match="unknown split"):
        shards.list_shards(tmp_path, "test")


def test_shards_for_rank_splits_by_global_rank_without_overlap():
    files = [shards.shard_name("train", i, 8) for i in range(8)]
    parts = [shards.shards_for_rank(files, r, 3) for r in range(3)]
    assert parts[0] == [files[0], files[3], files[6]]
    assert sorted(f for part in parts for f in part) == files
    with pytest.raises(TrainingError, match=r"9 workers but only 8 shard"):
        shards.shards_for_rank(files, 0, 9)
    with pytest.raises(TrainingError, match="outside"):
        shards.shards_for_rank(files, 3, 3)


def test_shard_name_format():
    assert shards.shard_name("train", 0, 1024) == "train-00000-of-01024"
    assert shards.shard_name("validation", 127, 128) == "validation-00127-of-00128"


class FakeClock:
    def __init__(self, ticks):
        self.ticks = iter(ticks)

    def __call__(self):
        return next(self.ticks)


def test_meter_excludes_warmup_and_counts_only_timed_images():
    # 4 steps: the first (warm-up) takes 10 s, the others 1, 2 and 3 s, with a 50 s gap (an
    # epoch boundary) before the last one that must not count.
    clock = FakeClock([0, 10, 10.5, 11.5, 12, 14, 63, 66])
    meter = throughput.ThroughputMeter(images_per_step=64, warmup_steps=1, clock=clock)
    for _ in range(4):
        meter.begin()
        meter.end()
    r = meter.result(
        framework="keras",
        model="resnet50",
        image_size=32,
        batch_per_worker=16,
        workers=2,
        precision="fp32",
        data_source="synthetic",
        grad_accum=2,
    )
    assert r["timed_steps"] == 3 and r["warmup_steps"] == 1
    assert r["images_timed"] == 3 * 64 and r["grad_accum"] == 2
    assert r["images_per_sec"] == pytest.approx(192 / 6)
    assert r["images_per_sec_per_worker"] == pytest.approx(16)
    assert r["median_step_time_s"] == 2
    assert r["wall_time_s"] == 66
    # From the first timed step's begin to the last one's end, the gaps included.
    assert r["timed_span_s"] == 55.5
    assert tuple(r) == throughput.FIELDS


def test_throughput_lines_round_trip_through_the_parser():
    meter = throughput.ThroughputMeter(8, 0, clock=FakeClock([0, 0.5]))
    meter.begin()
    meter.end()
    r = meter.result(
        framework="tf",
        model="tiny",
        image_size=32,
        batch_per_worker=4,
        workers=2,
        precision="bf16",
        data_source="tfrecord",
        grad_accum=1,
    )
    human, line = throughput.format_lines(r)
    assert human.startswith("Total images/sec: 16.0")
    log = f"noise\n[1,0]<stdout>:{human}\n[1,0]<stdout>:{line}\n{{not json}}\n"
    assert throughput.parse_throughput_lines(log) == [r]
    assert throughput.parse_throughput_lines(json.dumps({"schema": "other"})) == []


def test_meter_with_only_warmup_steps_reports_no_rate():
    meter = throughput.ThroughputMeter(8, 5, clock=FakeClock([0, 1]))
    meter.begin()
    meter.end()
    r = meter.result(
        framework="tf",
        model="tiny",
        image_size=32,
        batch_per_worker=4,
        workers=2,
        precision="fp32",
        data_source="synthetic",
        grad_accum=1,
    )
    assert r["images_per_sec"] is None and r["timed_steps"] == 0 and r["timed_span_s"] is None
    assert "n/a" in throughput.format_lines(r)[0]


def test_lr_scales_with_global_batch_and_warms_up_from_the_base_rate_like_goyal():
    # Goyal et al. 2017, section 2.2: "start from a learning rate of η and increment it by a
    # constant amount at each iteration such that it reaches η̂ = kη after 5 epochs".
    peak = schedule.peak_lr(0.1, 256, batch_per_worker=64, workers=8)
    assert peak == pytest.approx(0.2)
    assert schedule.peak_lr(0.1, 256, 32, 2) == schedule.peak_lr(0.1, 256, 64, 1)
    kw = dict(peak=peak, base=0.1, warmup_epochs=5, decay="step", epochs=90)
    assert schedule.lr_at(0, **kw) == pytest.approx(0.1)
    assert schedule.lr_at(2.5, **kw) == pytest.approx(0.15)
    assert schedule.lr_at(5, **kw) == pytest.approx(peak)
    assert schedule.lr_at(30, **kw) == pytest.approx(peak * 0.1)
    assert schedule.lr_at(85, **kw) == pytest.approx(peak * 0.001)


@pytest.mark.parametrize(
    ("workers", "batch", "accum"), [(1, 256, 4), (4, 256, 1), (2, 128, 4), (32, 32, 1), (1, 64, 1)]
)
def test_the_first_step_runs_at_the_base_rate_however_the_global_batch_is_made_up(
    workers, batch, accum
):
    args = options.parse_args("torch", ["--grad-accum", str(accum), "--batch-size", str(batch)])
    peak = schedule.peak_lr(args.base_lr, args.base_batch, batch * accum, workers)
    lr_at = schedule.from_options(args, peak)
    # A global batch below --base-batch (1 × 64) has a peak below the base rate: no warm-up.
    assert lr_at(0.0) == pytest.approx(min(args.base_lr, peak))
    assert lr_at(args.warmup_epochs) == pytest.approx(peak)


def test_fractional_warmup_ends_mid_epoch_and_decay_follows():
    kw = dict(peak=1.0, base=0.5, warmup_epochs=0.5, decay="step", epochs=3, decay_epochs=(1,))
    assert schedule.lr_at(0.25, **kw) == pytest.approx(0.75)
    assert schedule.lr_at(0.5, **kw) == schedule.lr_at(0.75, **kw) == pytest.approx(1.0)
    assert schedule.lr_at(1.0, **kw) == pytest.approx(0.1)
    args = options.parse_args(
        "tf", ["--warmup-epochs", "0.5", "--decay-epochs", "1", "--base-lr", "0.5"]
    )
    lr_at = schedule.from_options(args, peak=1.0)
    assert [lr_at(e) for e in (0.25, 0.75, 1.0)] == pytest.approx([0.75, 1.0, 0.1])


def test_an_epoch_is_one_pass_in_optimizer_steps():
    # 1,281,167 images, 32 per worker, 2 workers: 20,018 steps; with 4 micro-batches a step,
    # a quarter of them (not 4 passes over the data).
    assert schedule.steps_per_epoch(IMAGENET_TRAIN_IMAGES, 32, 2, 1) == 20_018
    assert schedule.steps_per_epoch(IMAGENET_TRAIN_IMAGES, 32, 2, 4) == 5_004
    assert schedule.steps_per_epoch(10, 32, 2, 4) == 1


def test_cosine_decay_goes_from_peak_to_zero_after_warmup():
    kw = dict(peak=1.0, base=0.5, warmup_epochs=2, decay="cosine", epochs=12)
    assert schedule.lr_at(2, **kw) == pytest.approx(1.0)
    assert schedule.lr_at(7, **kw) == pytest.approx(0.5)
    assert schedule.lr_at(12, **kw) == pytest.approx(0.0, abs=1e-12)
    assert schedule.lr_at(3, **kw) > schedule.lr_at(4, **kw)


def test_checkpoint_progress_is_atomic_and_pruned(tmp_path):
    assert checkpoints.read_progress(tmp_path) is None
    for epoch in (1, 2, 3):
        name = checkpoints.payload_name(epoch)
        _touch(tmp_path, f"{name}.index", f"{name}.data-00000-of-00001")
        p = checkpoints.Progress(epoch, epoch * 10, name, "keras", "tiny")
        checkpoints.write_progress(tmp_path, p, keep=2)
    assert checkpoints.read_progress(tmp_path) == p
    left = sorted(f.name for f in tmp_path.iterdir())
    assert left == [
        "ckpt-00002.data-00000-of-00001",
        "ckpt-00002.index",
        "ckpt-00003.data-00000-of-00001",
        "ckpt-00003.index",
        "progress.json",
    ]
    with pytest.raises(TrainingError, match="for keras/tiny, not torch/tiny"):
        checkpoints.check_compatible(p, "torch", "tiny", tmp_path)


def test_mid_epoch_checkpoints_sort_in_training_order_and_share_the_pruning(tmp_path):
    order = [(0, 10), (0, 20), (1, 0), (1, 5), (1, 15), (2, 0), (10, 0), (10, 3)]
    names = [checkpoints.payload_name(epoch, step) for epoch, step in order]
    assert names[2:4] == ["ckpt-00001", "ckpt-00001-s000005"] and sorted(names) == names
    for (epoch, step), name in zip(order, names, strict=True):
        _touch(tmp_path, f"{name}.pt")
        p = checkpoints.Progress(epoch, epoch * 25 + step, name, "torch", "tiny", step)
        checkpoints.write_progress(tmp_path, p, keep=2)
    assert sorted(f.name for f in tmp_path.glob("ckpt-*")) == [
        "ckpt-00010-s000003.pt",
        "ckpt-00010.pt",
    ]
    assert checkpoints.describe(p) == "epoch 10, step 3 of epoch 11 (step 253)"
    # A progress file from before mid-epoch checkpoints has no "step": the epoch's start.
    (tmp_path / "progress.json").write_text(
        '{"epoch": 2, "global_step": 50, "checkpoint": "ckpt-00002", "framework": "torch", '
        '"model": "tiny"}'
    )
    old = checkpoints.read_progress(tmp_path)
    assert old.step == 0 and checkpoints.describe(old) == "epoch 2 (step 50)"
    assert [checkpoints.due(s, 10) for s in (9, 10, 20)] == [False, True, True]
    assert not checkpoints.due(10, None)
    # Relaunched with twice the workers (half the steps per epoch): the same fraction of it.
    assert checkpoints.rescale_step(300, 1000, 500) == 150
    assert checkpoints.rescale_step(300, 0, 500) == checkpoints.rescale_step(300, 500, 500) == 300


def test_options_reject_bad_values_with_clear_messages(capsys):
    args = options.parse_args("keras", ["--batch-size", "4", "--model", "tiny", "--xla"])
    assert (args.batch_size, args.model, args.xla, args.data_dir) == (4, "tiny", True, None)
    assert options.parse_args("tf", []).grad_accum == 1  # no option, the same meaning
    for argv, message in [
        (["--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
        (["--model", "vgg"], "invalid choice: 'vgg'"),
        (["--precision", "fp8"], "invalid choice: 'fp8'"),
        (["--num-classes", "x"], "expected an integer"),
    ]:
        with pytest.raises(SystemExit) as exc:
            options.parse_args("tf", argv)
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


# NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets/configs.yml (commit 097c7ff9, read
# 2026-11-24): resnet50 uses `resnet_params` (momentum 0.875, warmup 8, lr_schedule cosine,
# label_smoothing 0.1) with `resnet_params_2k` (optimizer_batch_size 2048, lr 2.048,
# weight_decay 3.0517578125e-05).
NVIDIA_CONFIG = {"optimizer_batch_size": 2048, "lr": 2.048, "weight_decay": 3.0517578125e-05}
NVIDIA_CONFIG |= {"momentum": 0.875, "warmup": 8, "lr_schedule": "cosine", "label_smoothing": 0.1}
# Goyal et al. 2017 (arXiv 1706.02677): lr 0.1 per 256 (§2.1), 5 warm-up epochs (§2.2),
# momentum 0.9, weight decay 1e-4, ÷10 at epochs 30, 60, 80 (§5.1).
GOYAL = {"base_lr": 0.1, "warmup_epochs": 5, "momentum": 0.9, "weight_decay": 1e-4}


def _recipe_values(args):
    keys = ("base_lr", "base_batch", "momentum", "weight_decay", "label_smoothing")
    return {k: getattr(args, k) for k in (*keys, "warmup_epochs", "lr_decay")}


@pytest.mark.parametrize("framework", options.FRAMEWORKS)
def test_recipe_goyal_is_the_default_and_nvidia_gives_nvidias_resnet50_values(framework):
    default = options.parse_args(framework, [])
    assert default.recipe == "goyal"
    assert _recipe_values(default) == {
        **GOYAL, "base_batch": 256, "label_smoothing": 0.1, "lr_decay": "step"
    }  # fmt: skip
    assert default.decay_epochs == [30, 60, 80] and default.decay_factor == 0.1
    assert options.parse_args(framework, ["--recipe", "goyal"]) == default

    nvidia = options.parse_args(framework, ["--recipe", "nvidia"])
    c = NVIDIA_CONFIG
    # The rate per --base-batch images, scaled linearly to NVIDIA's batch, is NVIDIA's rate.
    assert nvidia.base_lr * c["optimizer_batch_size"] / nvidia.base_batch == pytest.approx(c["lr"])
    assert (nvidia.momentum, nvidia.weight_decay) == (c["momentum"], c["weight_decay"])
    assert (nvidia.warmup_epochs, nvidia.lr_decay) == (c["warmup"], c["lr_schedule"])
    assert nvidia.label_smoothing == c["label_smoothing"]


def test_an_option_given_on_its_own_wins_over_the_recipe(capsys):
    argv = ["--recipe", "nvidia", "--momentum", "0.5", "--lr-decay", "step", "--base-lr", "0"]
    args = options.parse_args("torch", [*argv, "--label-smoothing", "0", "--warmup-epochs", "1"])
    assert (args.momentum, args.lr_decay, args.base_lr) == (0.5, "step", 0.0)
    assert (args.label_smoothing, args.warmup_epochs) == (0.0, 1.0)
    assert args.weight_decay == NVIDIA_CONFIG["weight_decay"]  # the one left to the recipe
    with pytest.raises(SystemExit) as exc:
        options.parse_args("keras", ["--recipe", "imagenet"])
    assert exc.value.code == 2
    assert "invalid choice: 'imagenet' (choose from 'goyal', 'nvidia')" in capsys.readouterr().err


def test_help_lists_every_recipe_with_its_values_and_source():
    text = " ".join(options.build_parser("tf").format_help().split())
    assert "goyal: lr 0.1 per 256, momentum 0.9, weight decay 0.0001" in text
    assert "Goyal et al. 2017 (arXiv 1706.02677" in text
    assert "nvidia: lr 0.256 per 256, momentum 0.875, weight decay 3.0517578125e-05" in text
    assert "PyTorch/Classification/ConvNets/configs.yml" in text
    assert "(default: from --recipe)" in text


def test_synthetic_samples_are_deterministic_and_sliced_by_rank():
    images, labels = synthetic.samples(0, 8, 32, 5, seed=3)
    assert images.shape == (8, 32, 32, 3) and images.dtype == np.float32
    assert labels.min() >= 0 and labels.max() < 5 and -0.5 <= images.min() < images.max() < 0.5
    again, _ = synthetic.samples(0, 8, 32, 5, seed=3)
    np.testing.assert_array_equal(images, again)
    assert not np.array_equal(images, synthetic.samples(0, 8, 32, 5, seed=4)[0])
    r1_images, r1_labels = synthetic.rank_batch(4, 1, 2, 32, 5, seed=3)
    np.testing.assert_array_equal(r1_images, images[4:])
    np.testing.assert_array_equal(r1_labels, labels[4:])
    with pytest.raises(ValueError, match=r"rank 2 is outside 0\.\.1"):
        synthetic.rank_batch(4, 2, 2, 32, 5)


def test_synthetic_rank_batch_makes_only_its_own_slice():
    import tracemalloc

    tracemalloc.start()
    images, _ = synthetic.rank_batch(4, 63, 64, 64, 10)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    slice_bytes = images.nbytes  # 4 images; the global batch would be 64 times that
    assert peak < 3 * slice_bytes, (peak, slice_bytes)
    np.testing.assert_array_equal(images, synthetic.samples(252, 4, 64, 10)[0])


def test_worker_threads_are_the_option_or_this_workers_share_of_its_cores(monkeypatch):
    from types import SimpleNamespace

    from training import worker

    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: set(range(48)))
    assert worker.worker_threads(SimpleNamespace(threads=0), local_size=4) == 12
    assert worker.worker_threads(SimpleNamespace(threads=0), local_size=96) == 1
    assert worker.worker_threads(SimpleNamespace(threads=5), local_size=4) == 5
