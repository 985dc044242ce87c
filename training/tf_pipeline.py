"""The tf.data input pipeline of every flavour: TFRecord shards or the synthetic source.

TFRecords: this worker's shards (by global rank) → shuffled file order → interleaved reads →
shuffle buffer → decode + random-resized-crop + flip (train) or center crop (validation) →
batch → prefetch, on a thread pool of the dataset's own (the PyTorch flavour holds TensorFlow's
op threads to one; decoding must not be held with them). Synthetic: this worker's micro-batches
of one fixed global batch, repeated.

Batches are micro-batches of `--batch-size`; an epoch is one pass over the data, in optimizer
steps of `--grad-accum` micro-batches on every worker (training.schedule.steps_per_epoch).
"""

import contextlib
from dataclasses import dataclass

import tensorflow as tf

from training import data_order, record_count, records, schedule, shards, synthetic
from training.errors import TrainingError

AUTOTUNE = tf.data.AUTOTUNE
MEAN = (0.485, 0.456, 0.406)  # ImageNet channel statistics of [0, 1] pixels
STD = (0.229, 0.224, 0.225)
CENTER_CROP_PADDING = 32  # validation crops image_size / (image_size + 32) of the short side
LABEL_CHECK = "label >= --num-classes"


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
    (training.data_order), so a resumed run draws a fresh order instead of the first epoch's.
    `gather`: the flavour's `hvd.allgather_object`, to count unlabelled shards once per job
    (training.record_count); None: this process counts them all.
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
    try:
        all_val = shards.list_shards(args.data_dir, "validation")
    except TrainingError:
        if args.val_steps:
            raise
        all_val = []  # no validation split: train without validation
    # With fewer validation shards than workers the last ranks have none: they evaluate
    # nothing, and the correct/seen counts summed over workers stay right.
    val_files = all_val[rank::size]

    if args.steps_per_epoch:
        steps = args.steps_per_epoch
    else:
        with explained_data_errors(all_train):
            examples = record_count.count_examples(
                args.data_dir, all_train, rank, size, gather, threads
            )
        steps = schedule.steps_per_epoch(examples, args.batch_size, size, args.grad_accum)
    seed = data_order.shuffle_seed(args.seed, rank, *start)
    own_pool = tf.data.Options()
    own_pool.threading.private_threadpool_size = threads
    files = tf.data.Dataset.from_tensor_slices(train_files)
    files = files.shuffle(len(train_files), seed=seed).repeat()
    train = (
        files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(train_files), 8),
            num_parallel_calls=AUTOTUNE,
            deterministic=False,
        )
        .shuffle(args.shuffle_buffer, seed=seed)
        .map(lambda r: _train_example(r, args.image_size, args.num_classes), AUTOTUNE)
        .batch(args.batch_size, drop_remainder=True)
        .prefetch(AUTOTUNE)
        .with_options(own_pool)
    )
    validation = None
    if all_val and args.val_steps != 0:
        validation = (
            tf.data.TFRecordDataset(tf.constant(val_files, dtype=tf.string))
            .map(lambda r: _validation_example(r, args.image_size, args.num_classes), AUTOTUNE)
            .batch(args.batch_size)
        )
        if args.val_steps:
            validation = validation.take(args.val_steps)
        validation = validation.prefetch(AUTOTUNE).with_options(own_pool)
    return Data(train, steps, validation, "tfrecord", train_files + val_files)


def _checked_label(features, num_classes):
    label = features["image/class/label"]
    check = tf.debugging.Assert(
        label < num_classes,
        [LABEL_CHECK, num_classes, "label", label, "image", features["image/filename"]],
    )
    with tf.control_dependencies([check]):
        return tf.identity(label)


def _normalize(image, image_size):
    image = tf.image.resize(image, [image_size, image_size]) / 255.0
    return (image - MEAN) / STD


def _train_example(serialized, image_size, num_classes):
    features = records.parse_example(serialized)
    label = _checked_label(features, num_classes)
    jpeg = features["image/encoded"]
    begin, crop, _ = tf.image.sample_distorted_bounding_box(
        tf.image.extract_jpeg_shape(jpeg),
        bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
        min_object_covered=0.1,
        aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.08, 1.0),
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    window = tf.stack([begin[0], begin[1], crop[0], crop[1]])
    image = tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)
    image = tf.image.random_flip_left_right(image)
    return _normalize(image, image_size), label


def _validation_example(serialized, image_size, num_classes):
    features = records.parse_example(serialized)
    label = _checked_label(features, num_classes)
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
        raise TrainingError(
            f"a label in the data is not below --num-classes: {detail}; "
            "labels must be 0..num_classes-1, so raise --num-classes"
        ) from None
