"""ResNet50 with Keras `model.fit` and Horovod: one process per worker.

    horovodrun --gloo -np 2 -H localhost:2 python -m training.train_keras --image-size 64 ...

Horovod pieces: `hvd.DistributedOptimizer` (allreduce-averaged gradients, optional fp16
compression and gradient accumulation), the metric-averaging and LR warm-up/schedule callbacks.
Rank 0 alone checkpoints, writes TensorBoard logs and prints the throughput lines.
"""

import sys

import horovod.tensorflow.keras as hvd
import tensorflow as tf

from training import options, schedule, tf_common, tf_models, tf_pipeline
from training.throughput import ThroughputMeter

FRAMEWORK = "keras"


class StepTimer(tf.keras.callbacks.Callback):
    """Feeds every training batch's duration to the throughput meter."""

    def __init__(self, meter: ThroughputMeter):
        super().__init__()
        self.meter = meter

    def on_train_batch_begin(self, batch, logs=None):
        self.meter.begin()

    def on_train_batch_end(self, batch, logs=None):
        self.meter.end()


class RankZeroCheckpoint(tf.keras.callbacks.Callback):
    """Rank 0: model + optimizer state and progress at the end of every epoch."""

    def __init__(self, args, steps_per_epoch: int):
        super().__init__()
        self.args = args
        self.steps_per_epoch = steps_per_epoch
        self.last = None

    def on_epoch_end(self, epoch, logs=None):
        done = epoch + 1
        self.last = tf_common.save_checkpoint(
            self.args,
            FRAMEWORK,
            self.model,
            self.model.optimizer,
            done,
            done * self.steps_per_epoch,
        )


def train(args) -> None:
    tf_common.setup(args)
    if args.xla:
        tf_common.enable_xla_autoclustering()
    rank, size = hvd.rank(), hvd.size()
    data = tf_pipeline.make_data(args, rank, size)
    # With gradient accumulation a Keras "step" is one micro-batch; the optimizer applies
    # the averaged gradients every `grad_accum` of them.
    fit_steps = data.steps_per_epoch * args.grad_accum

    peak = schedule.peak_lr(args.base_lr, args.base_batch, args.batch_size * args.grad_accum, size)
    optimizer = hvd.DistributedOptimizer(
        tf.keras.optimizers.SGD(learning_rate=peak, momentum=args.momentum),
        compression=tf_common.compression(args),
        backward_passes_per_step=args.grad_accum,
        average_aggregated_gradients=True,
    )
    if args.precision == "fp16":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    model = tf_models.build_model(args.model, args.image_size, args.num_classes)
    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        # Horovod's allreduce has no XLA kernel on CPU, so the whole train step can't be
        # compiled; --xla turns on auto-clustering instead.
        jit_compile=False,
    )
    progress = tf_common.restore_and_broadcast(args, FRAMEWORK, model, optimizer)
    initial_epoch = progress.epoch if progress else 0

    meter = ThroughputMeter(args.batch_size * size, args.timing_warmup_steps)
    checkpoint = RankZeroCheckpoint(args, data.steps_per_epoch)
    callbacks = [
        # Averages the epoch's metrics (validation accuracy included) over all workers; must
        # come before the callbacks that read them.
        hvd.callbacks.MetricAverageCallback(),
        # momentum_correction breaks with the Keras 2.11+ optimizers (Horovod 0.28.1).
        hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=peak,
            warmup_epochs=args.warmup_epochs,
            momentum_correction=False,
            steps_per_epoch=fit_steps,
            verbose=1 if rank == 0 else 0,
        ),
        hvd.callbacks.LearningRateScheduleCallback(
            initial_lr=peak,
            multiplier=lambda epoch: schedule.decay_multiplier(
                epoch,
                decay=args.lr_decay,
                epochs=args.epochs,
                warmup_epochs=args.warmup_epochs,
                decay_epochs=tuple(args.decay_epochs),
                decay_factor=args.decay_factor,
            ),
            start_epoch=int(args.warmup_epochs + 0.999999),
            staircase=False,
            momentum_correction=False,
            steps_per_epoch=fit_steps,
        ),
        StepTimer(meter),
    ]
    if rank == 0 and args.checkpoint_dir:
        callbacks.append(checkpoint)
    if rank == 0 and args.log_dir:
        callbacks.append(tf.keras.callbacks.TensorBoard(args.log_dir, update_freq="epoch"))

    with tf_pipeline.explained_data_errors(data.files):
        model.fit(
            data.train,
            steps_per_epoch=fit_steps,
            epochs=args.epochs,
            initial_epoch=initial_epoch,
            validation_data=data.validation,
            callbacks=callbacks,
            verbose=2 if rank == 0 else 0,
        )
    tf_common.dump_weights(args, model, rank)
    tf_common.report(args, FRAMEWORK, meter, data.source, size, rank, checkpoint.last)


def main(argv=None) -> int:
    return tf_common.run_main(train, options.parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
