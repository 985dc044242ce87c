"""What the TensorFlow flavours share besides the data: Horovod and precision set-up,
validation loss and accuracy pooled over workers, rank-0 checkpoints with broadcast on resume. What
every flavour shares (threads, the end-of-run report, the error exit) is in training.worker."""

import os
import time
from pathlib import Path

import numpy as np

from training import checkpoints, events
from training.errors import TrainingError

POLICIES = {"fp32": "float32", "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


def setup(args):
    """Initialise Horovod (timeline first: it is read at init), threads, seed, precision.

    Returns `horovod.tensorflow`. Every rank seeds the same way, so the initial weights already
    agree; they are broadcast from rank 0 anyway (see `broadcast_state`).
    """
    if args.horovod_timeline:
        os.environ["HOROVOD_TIMELINE"] = str(Path(args.horovod_timeline).resolve())
    import horovod.tensorflow as hvd
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    hvd.init()
    events.started()
    # One GPU per worker, by local rank (a no-op on CPU-only machines like the test VM). Modulo
    # the GPUs seen: a launcher may already have given each worker just its own.
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    tf.keras.utils.set_random_seed(args.seed)
    tf.keras.mixed_precision.set_global_policy(POLICIES[args.precision])
    return hvd


def correct_predictions(logits, labels):
    """How many of the batch's top-1 predictions are right (an int32 tensor)."""
    import tensorflow as tf

    predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
    return tf.reduce_sum(tf.cast(predicted == tf.cast(labels, tf.int64), tf.int32))


def pooled_validation(model, loss_fn):
    """A function of a validation dataset: `val_loss` (the training loss without weight decay),
    `val_accuracy` and `val_top5` over the batches of every worker together (sums and counts
    added over workers). Every worker must call it; one without validation data passes an empty
    dataset and adds nothing."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    @tf.function
    def sums(images, labels):
        logits = tf.cast(model(images, training=False), tf.float32)
        top5 = tf.math.in_top_k(tf.cast(labels, tf.int32), logits, k=min(5, logits.shape[-1]))
        return tf.stack(
            [
                tf.reduce_sum(tf.cast(loss_fn(labels, logits), tf.float64)),
                tf.cast(correct_predictions(logits, labels), tf.float64),
                tf.reduce_sum(tf.cast(top5, tf.float64)),
                tf.cast(tf.size(labels), tf.float64),
            ]
        )

    def evaluate(dataset) -> dict[str, float]:
        totals = tf.zeros(4, tf.float64)
        for images, labels in dataset:
            totals += sums(images, labels)
        loss, top1, top5, seen = hvd.allreduce(totals, op=hvd.Sum, name="val").numpy()
        seen = max(seen, 1.0)
        return {"val_loss": loss / seen, "val_accuracy": top1 / seen, "val_top5": top5 / seen}

    return evaluate


def print_recipe(args, model, peak: float, workers: int) -> None:
    """Rank 0: training.recipe's summary line for this Keras model."""
    import horovod.tensorflow as hvd

    from training import recipe
    from training.tensorflow import keras_loss

    if hvd.rank() != 0:
        return
    decayed = {id(k) for k in keras_loss.decayed_kernels(model)}
    tensors = [(tuple(w.shape), id(w) in decayed) for w in model.trainable_weights]
    batch = args.batch_size * args.grad_accum * workers
    print(recipe.summary_line(args, tensors, peak, batch), flush=True)


def enable_xla_autoclustering() -> None:
    """XLA compiles the parts of the graph it can; Horovod's ops stay outside the clusters."""
    import tensorflow as tf

    os.environ["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    tf.config.optimizer.set_jit("autoclustering")


def compression(args):
    import horovod.tensorflow as hvd

    return hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none


def restore_and_broadcast(
    args, framework, model, optimizer, broadcast: bool = True
) -> checkpoints.Progress | None:
    """Rank 0 restores the last checkpoint (if any); every rank then gets rank 0's weights,
    optimizer state (with the fp16 loss scale) and progress. Broadcasting before the first step
    (rather than Horovod's Keras callback, which broadcasts after it) keeps the first resumed
    step exact. `broadcast=False` (elastic runs): rank 0 only restores; the elastic state's
    first sync broadcasts, and the other ranks get None."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from training.tensorflow.elastic_state import state_variables

    optimizer.build(model.trainable_variables)
    progress = None
    began = time.monotonic()
    if hvd.rank() == 0:
        progress = checkpoints.read_progress(args.checkpoint_dir)
        if progress:
            checkpoints.check_compatible(progress, framework, args.model, args.checkpoint_dir)
            path = Path(args.checkpoint_dir) / progress.checkpoint
            try:
                tf.train.Checkpoint(model=model, optimizer=optimizer).read(
                    str(path)
                ).assert_consumed()
            except (AssertionError, ValueError) as exc:
                raise TrainingError(
                    f"checkpoint {str(path)!r} does not fit this model and optimizer (was it "
                    "written with another --num-classes or --precision? fp16 adds a loss scale): "
                    f"{str(exc).splitlines()[0]}"
                ) from None
            print(f"resuming from {path} at {checkpoints.describe(progress)}", flush=True)
    if broadcast:
        progress = hvd.broadcast_object(progress, root_rank=0, name="progress")
        hvd.broadcast_variables(state_variables(model, optimizer), root_rank=0)
    if progress is not None:
        events.restored(progress.global_step, time.monotonic() - began)
    return progress


def save_checkpoint(
    args, framework, model, optimizer, epoch, global_step, step=0, steps_per_epoch=0
) -> Path:
    """Rank 0 only: payload, then progress.json (see training.checkpoints). `step`: steps done
    in epoch `epoch` of `steps_per_epoch` (mid-epoch checkpoints)."""
    import tensorflow as tf

    name = checkpoints.payload_name(epoch, step)
    Path(args.checkpoint_dir).mkdir(parents=True, exist_ok=True)
    progress = checkpoints.Progress(
        epoch, global_step, name, framework, args.model, step, steps_per_epoch
    )
    with events.checkpoint(global_step):
        tf.train.Checkpoint(model=model, optimizer=optimizer).write(
            str(Path(args.checkpoint_dir) / name)
        )
        return checkpoints.write_progress(args.checkpoint_dir, progress, args.keep_checkpoints)


def dump_weights(args, model, rank: int) -> None:
    if args.dump_weights:
        Path(args.dump_weights).mkdir(parents=True, exist_ok=True)
        arrays = {f"w{i:03d}": v.numpy() for i, v in enumerate(model.weights)}
        np.savez(Path(args.dump_weights) / f"rank-{rank}.npz", **arrays)
