"""ResNet50 with Keras `model.fit` and Horovod: one process per worker.

    horovodrun --gloo -np 2 -H localhost:2 python -m training.train_keras --image-size 64 ...

Horovod pieces: `hvd.DistributedOptimizer` (allreduce-averaged gradients, optional fp16
compression and gradient accumulation) and `MetricAverageCallback` (the epoch's training loss
and accuracy averaged over workers). The rest is this module's, so that Keras agrees with the
other flavours: the learning rate is set before every optimizer step from training.schedule
(Horovod's warm-up and schedule callbacks compare the whole-number epoch with a fractional
warm-up end and run one step ahead), validation accuracy is summed over workers (a worker
without a validation shard takes part with nothing), and rank 0's weights are broadcast before
the first step (tf_common.restore_and_broadcast). Rank 0 alone checkpoints, writes TensorBoard
logs and prints the throughput lines.
"""

import sys
from collections.abc import Callable

import horovod.tensorflow.keras as hvd
import tensorflow as tf

from training import options, recipe, schedule, tf_common, tf_models, tf_pipeline
from training.throughput import ThroughputMeter

FRAMEWORK = "keras"


class StepTimer(tf.keras.callbacks.Callback):
    """Times optimizer steps (`grad_accum` Keras batches each) for the throughput meter."""

    def __init__(self, meter: ThroughputMeter, grad_accum: int):
        super().__init__()
        self.meter, self.grad_accum = meter, grad_accum

    def on_train_batch_begin(self, batch, logs=None):
        if batch % self.grad_accum == 0:
            self.meter.begin()

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.grad_accum == 0:
            self.meter.end()


class ScheduledLearningRate(tf.keras.callbacks.Callback):
    """Sets the rate before every optimizer step to `lr_at(epoch + steps done / steps per
    epoch)`, like the TF and PyTorch loops; logs the epoch's last rate as `lr`."""

    def __init__(self, lr_at: Callable[[float], float], steps_per_epoch: int, grad_accum: int):
        super().__init__()
        self.lr_at, self.steps, self.grad_accum = lr_at, steps_per_epoch, grad_accum
        self.epoch, self.lr = 0, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if batch % self.grad_accum == 0:  # the first micro-batch of an optimizer step
            self.lr = self.lr_at(self.epoch + batch // self.grad_accum / self.steps)
            self.model.optimizer.learning_rate.assign(self.lr)

    def on_epoch_end(self, epoch, logs=None):
        logs["lr"] = self.lr


class PooledValidation(tf.keras.callbacks.Callback):
    """`val_loss`, `val_accuracy` and `val_top5` at every epoch's end over all workers'
    validation batches together.

    Instead of Keras' `validation_data`: that evaluates each worker's data on its own (the
    metric average would weigh workers equally) and can't run on a worker with no batches.
    """

    def __init__(self, dataset: tf.data.Dataset, loss_fn):
        super().__init__()
        self.dataset, self.loss_fn = dataset, loss_fn

    def set_model(self, model):
        super().set_model(model)
        self.evaluate = tf_common.pooled_validation(model, self.loss_fn)

    def on_epoch_end(self, epoch, logs=None):
        logs.update(self.evaluate(self.dataset))


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
    data = tf_pipeline.make_data(args, rank, size, tf_common.worker_threads(args, hvd.local_size()))
    # A Keras "step" is one micro-batch; the optimizer applies the averaged gradients every
    # `grad_accum` of them, and an epoch (data.steps_per_epoch) counts optimizer steps.
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
    recipe.add_keras_weight_decay(model, args.weight_decay)
    tf_common.print_recipe(args, model, peak, size)
    loss_fn = recipe.keras_loss(args.label_smoothing)
    model.compile(
        optimizer=optimizer,
        loss=loss_fn,
        metrics=["accuracy"],
        # Horovod's allreduce has no XLA kernel on CPU, so the whole train step can't be
        # compiled; --xla turns on auto-clustering instead.
        jit_compile=False,
    )
    progress = tf_common.restore_and_broadcast(args, FRAMEWORK, model, optimizer)
    initial_epoch = progress.epoch if progress else 0

    meter = ThroughputMeter(args.batch_size * args.grad_accum * size, args.timing_warmup_steps)
    checkpoint = RankZeroCheckpoint(args, data.steps_per_epoch)
    callbacks = [
        # Averages the epoch's training metrics over all workers; must come before the
        # callbacks that read them.
        hvd.callbacks.MetricAverageCallback(),
        ScheduledLearningRate(
            schedule.from_options(args, peak), data.steps_per_epoch, args.grad_accum
        ),
        StepTimer(meter, args.grad_accum),
    ]
    if data.validation is not None:
        callbacks.append(PooledValidation(data.validation, loss_fn))
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
            callbacks=callbacks,
            verbose=2 if rank == 0 else 0,
        )
    tf_common.dump_weights(args, model, rank)
    tf_common.report(args, FRAMEWORK, meter, data.source, size, rank, checkpoint.last)


def main(argv=None) -> int:
    return tf_common.run_main(train, options.parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
