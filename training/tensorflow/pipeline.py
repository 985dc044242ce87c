"""The tf.data input pipeline of the TensorFlow flavours: TFRecord shards or the synthetic source,
in micro-batches of `--batch-size` (docs/architecture.md, "The tf.data pipeline"); and
`parse_example`, the tf.data reading of training.data.records' schema.
"""

import contextlib
import math
import re
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from training import schedule
from training.data import record_count, records, shards, shuffle_order, synthetic
from training.errors import TrainingError

AUTOTUNE = tf.data.AUTOTUNE
MEAN = (0.485, 0.456, 0.406)  # ImageNet channel statistics of [0, 1] pixels
STD = (0.229, 0.224, 0.225)
CENTER_CROP_PADDING = 32  # validation crops image_size / (image_size + 32) of the short side
LABEL_CHECK = "label outside 0..num_classes-1"
# Random-resized-crop, as torchvision's RandomResizedCrop draws it (torchvision/transforms/
# transforms.py, `get_params`) with NVIDIA's 100 attempts (DALI `num_attempts=100`,
# DeepLearningExamples TensorFlow/Classification/ConvNets/utils/dali_utils.py): area uniform in
# 8-100 % of the image, aspect ratio log-uniform in 3/4-4/3; the first draw that fits wins, else
# a center crop of the whole image clamped to the aspect range. Then a horizontal flip (p = 0.5)
# and a resize to the training size.
CROP_AREA = (0.08, 1.0)
CROP_ASPECT = (3 / 4, 4 / 3)
CROP_ATTEMPTS = 100


@dataclass
class Data:
    train: tf.data.Dataset  # micro-batches, forever
    steps_per_epoch: int  # optimizer steps
    validation: tf.data.Dataset | None  # None on every worker alike; may be empty on some
    source: str  # "synthetic" or "tfrecord": the throughput line's data_source
    files: list[str]  # this worker's shards, searched when a read fails


def make_data(args, rank: int, size: int, threads: int, start=(0, 0), gather=None) -> Data:
    """Datasets of batches of `args.batch_size` for this worker; errors before any training.

    `threads`: the thread pool that reads and decodes TFRecords (this worker's share of cores).
    `start`: (epochs done, steps done in the epoch) the stream begins at; it seeds the shuffles
    (training.data.shuffle_order), so a resumed run draws a fresh order instead of the first
    epoch's.
    `gather`: the flavour's `hvd.allgather_object`, to count unlabelled shards once per job
    (training.data.record_count); None: this process counts them all.
    """
    if args.data_dir is None:
        return _synthetic(args, rank, size)
    return _tfrecords(args, rank, size, threads, start, gather)


def _synthetic(args, rank, size) -> Data:
    """One optimizer step's worth of this worker's images, cut into `grad_accum` micro-batches
    (the same images the PyTorch flavour takes), repeated."""
    b, accum = args.batch_size, args.grad_accum
    images, labels = synthetic.rank_batch(
        b * accum, rank, size, args.image_size, args.num_classes, args.seed
    )
    micro = tf.data.Dataset.from_tensor_slices(
        (images.reshape(accum, b, *images.shape[1:]), labels.reshape(accum, b))
    ).repeat()
    steps = args.steps_per_epoch or schedule.steps_per_epoch(args.synthetic_length, b, size, accum)
    validation = micro.take(args.val_steps) if args.val_steps else None
    return Data(micro, steps, validation, "synthetic", [])


def _tfrecords(args, rank, size, threads, start, gather) -> Data:
    all_train = shards.list_shards(args.data_dir, "train")
    train_files = shards.shards_for_rank(all_train, rank, size)
    all_val = shards.validation_shards(args.data_dir, bool(args.val_steps))
    val_files = all_val[rank::size]

    if args.steps_per_epoch:
        steps = args.steps_per_epoch
    else:
        with explained_data_errors(all_train):
            examples = record_count.count_examples(
                args.data_dir, all_train, rank, size, gather, threads
            )
        steps = schedule.steps_per_epoch(examples, args.batch_size, size, args.grad_accum)
    seed = shuffle_order.shuffle_seed(args.seed, rank, *start)
    own_pool = tf.data.Options()
    own_pool.threading.private_threadpool_size = threads
    files = tf.data.Dataset.from_tensor_slices(train_files)
    files = files.shuffle(len(train_files), seed=seed).repeat()
    records_in_order = files.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(train_files), 8),
        num_parallel_calls=AUTOTUNE,
        deterministic=False,
    ).shuffle(args.shuffle_buffer, seed=seed)
    # A stateless seed pair per example, from this rank's own stream (fresh for every start).
    seeds = tf.data.Dataset.random(seed=augmentation_seed(args.seed, rank, start)).batch(2)
    train = (
        tf.data.Dataset.zip((records_in_order, seeds))
        .map(
            lambda r, s: _train_example(r, s, args.image_size, args.num_classes, args.label_offset),
            AUTOTUNE,
        )
        .batch(args.batch_size, drop_remainder=True)
        .prefetch(AUTOTUNE)
        .with_options(own_pool)
    )
    validation = None
    if all_val and args.val_steps != 0:
        validation = (
            tf.data.TFRecordDataset(tf.constant(val_files, dtype=tf.string))
            .map(
                lambda r: _validation_example(
                    r, args.image_size, args.num_classes, args.label_offset
                ),
                AUTOTUNE,
            )
            .batch(args.batch_size)
        )
        if args.val_steps:
            validation = validation.take(args.val_steps)
        validation = validation.prefetch(AUTOTUNE).with_options(own_pool)
    return Data(train, steps, validation, "tfrecord", train_files + val_files)


def _checked_label(features, num_classes, offset):
    """The record's label minus `--label-offset`, asserted to be a class index."""
    label = features["image/class/label"] - offset
    check = tf.debugging.Assert(
        (label >= 0) & (label < num_classes),
        [LABEL_CHECK, num_classes, "label", label, "offset", offset, "image",
         features["image/filename"]],
    )  # fmt: skip
    with tf.control_dependencies([check]):
        return tf.identity(label)


def _normalize(image, image_size):
    image = tf.image.resize(image, [image_size, image_size]) / 255.0
    return (image - MEAN) / STD


def augmentation_seed(seed: int, rank: int, start: tuple[int, int] = (0, 0)) -> int:
    """The seed of rank `rank`'s augmentation stream: its own for every (--seed, rank) pair, so
    workers draw different crops and flips (one shared seed made every rank draw the same), and
    for every `start` (epochs, steps done), so a resumed run draws fresh crops as it draws a
    fresh order (training.data.shuffle_order)."""
    entropy = [seed, rank, *start]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0]) >> 1


def crop_window(height, width, seed):
    """The random-resized-crop window [top, left, crop height, crop width] (int32) of an image
    of `height` × `width` pixels, drawn from the stateless `seed` (shape [2]); see CROP_AREA."""
    h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    area_seed, aspect_seed, offset_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3)
    )
    area = h * w * tf.random.stateless_uniform([CROP_ATTEMPTS], area_seed, *CROP_AREA)
    log_aspect = tf.random.stateless_uniform(
        [CROP_ATTEMPTS], aspect_seed, math.log(CROP_ASPECT[0]), math.log(CROP_ASPECT[1])
    )
    crop_w = tf.round(tf.sqrt(area * tf.exp(log_aspect)))
    crop_h = tf.round(tf.sqrt(area / tf.exp(log_aspect)))
    fits = (crop_w > 0) & (crop_w <= w) & (crop_h > 0) & (crop_h <= h)
    first = tf.argmax(tf.cast(fits, tf.int32))  # the first attempt that fits (0 if none)
    # Fallback: the whole image, narrowed to the nearest allowed aspect ratio, centred.
    aspect = w / h
    center_w = tf.where(aspect > CROP_ASPECT[1], tf.round(h * CROP_ASPECT[1]), w)
    center_h = tf.where(aspect < CROP_ASPECT[0], tf.round(w / CROP_ASPECT[0]), h)
    found = tf.reduce_any(fits)
    crop_h = tf.where(found, crop_h[first], center_h)
    crop_w = tf.where(found, crop_w[first], center_w)
    u = tf.random.stateless_uniform([2], offset_seed)
    top = tf.where(found, tf.floor(u[0] * (h - crop_h + 1)), tf.floor((h - crop_h) / 2))
    left = tf.where(found, tf.floor(u[1] * (w - crop_w + 1)), tf.floor((w - crop_w) / 2))
    return tf.cast(tf.stack([top, left, crop_h, crop_w]), tf.int32)


def augment(jpeg, image_size, seed):
    """Training augmentation of one JPEG: random-resized-crop (decoding only the window), flip,
    resize and normalise, all drawn from the stateless `seed` (shape [2])."""
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    shape = tf.image.extract_jpeg_shape(jpeg)
    image = tf.image.decode_and_crop_jpeg(jpeg, crop_window(shape[0], shape[1], crop_seed), 3)
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    return _normalize(image, image_size)


def parse_example(serialized):
    """A scalar serialized Example (a `tf.string` tensor) → dict of tensors keyed as
    training.data.records' schema."""
    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/height": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/width": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/format": tf.io.FixedLenFeature([], tf.string, default_value=records.IMAGE_FORMAT),
        "image/filename": tf.io.FixedLenFeature([], tf.string, default_value=""),
    }
    return tf.io.parse_single_example(serialized, spec)


def _train_example(serialized, seed, image_size, num_classes, offset):
    features = parse_example(serialized)
    label = _checked_label(features, num_classes, offset)
    return augment(features["image/encoded"], image_size, seed), label


def _validation_example(serialized, image_size, num_classes, offset):
    features = parse_example(serialized)
    label = _checked_label(features, num_classes, offset)
    jpeg = features["image/encoded"]
    shape = tf.image.extract_jpeg_shape(jpeg)
    side = tf.cast(
        image_size
        / (image_size + CENTER_CROP_PADDING)
        * tf.cast(tf.minimum(shape[0], shape[1]), tf.float64),
        tf.int32,
    )
    window = tf.stack([(shape[0] - side + 1) // 2, (shape[1] - side + 1) // 2, side, side])
    image = tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)
    return _normalize(image, image_size), label


def find_corrupt_shard(files: list[str]) -> str | None:
    """The first of `files` whose records fail to read (CRC or framing errors)."""
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path):
                pass
        except tf.errors.DataLossError:
            return path
    return None


@contextlib.contextmanager
def explained_data_errors(files: list[str]):
    """Turn TensorFlow's data errors into messages that name the shard or the label."""
    try:
        yield
    except tf.errors.DataLossError as exc:
        bad = find_corrupt_shard(files)
        where = f"corrupt TFRecord file {bad!r}" if bad else "corrupt TFRecord data"
        raise TrainingError(f"{where}: {exc.message.splitlines()[0]}") from None
    except tf.errors.InvalidArgumentError as exc:
        if LABEL_CHECK not in exc.message:
            raise
        detail = exc.message.split("assertion failed:", 1)[-1].splitlines()[0].strip()
        found = re.search(
            r"\[(\d+)\] \[label\] \[(-?\d+)\] \[offset\] \[(\d+)\] \[image\] \[(.*?)\]", detail
        )
        if not found:
            raise TrainingError(f"a label in the data is not a class index: {detail}") from None
        classes, label, offset, image = found.groups()
        stored = (
            f"label {int(label) + int(offset)} of image {image!r} minus --label-offset {offset}"
        )
        if int(label) < 0:
            advice = f"is {label}, below 0: lower --label-offset (0-based shards need 0)"
        else:
            advice = (
                f"is {label}, not below --num-classes {classes}: raise --num-classes, or set "
                "--label-offset 1 for 1-based (TF-slim) shards"
            )
        raise TrainingError(
            f"a label in the data is not a class index: {stored} {advice}"
        ) from None
