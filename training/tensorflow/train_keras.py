"""ResNet50 with Keras `model.fit` and Horovod: one process per worker.

    horovodrun --gloo -np 2 -H localhost:2 python -m training.tensorflow.train_keras \\
        --image-size 64 ...

Horovod's `DistributedOptimizer` and `MetricAverageCallback`, and this module's callbacks so that
Keras agrees with the other flavours (docs/architecture.md, "The Keras flavour"). `--elastic`:
Horovod elastic training (training.tensorflow.elastic_state).
"""

import sys
from collections.abc import Callable

import horovod.tensorflow.keras as hvd
import tensorflow as tf
from horovod.tensorflow import allgather_object

from training import checkpoints, events, heartbeat, options, schedule, worker
from training.epoch_log import EpochLog
from training.tensorflow import (
    elastic_state,
    keras_loss,
    keras_models,
    loss_scale,
    pipeline,
    tf_worker,
)
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


class EpochMetrics(tf.keras.callbacks.Callback):
    """Every rank's step times and rank 0's metrics to MLflow at each epoch's end
    (training.epoch_log); after the callbacks that complete the epoch's logs."""

    def __init__(self, epochs: EpochLog, meter: ThroughputMeter):
        super().__init__()
        self.epochs, self.meter = epochs, meter

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.begin_epoch()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.end_epoch(epoch + 1, dict(logs or {}), self.meter)


class ScheduledLearningRate(tf.keras.callbacks.Callback):
    """Sets the rate before every optimizer step to `lr_at(epoch + steps done / steps per
    epoch)` from the run's position, like the TF and PyTorch loops; logs the epoch's last rate
    as `lr`."""

    def __init__(
        self, lr_at: Callable[[float], float], steps_per_epoch: int, grad_accum: int, state
    ):
        super().__init__()
        self.lr_at, self.steps, self.grad_accum = lr_at, steps_per_epoch, grad_accum
        self.state, self.lr = state, None

    def on_train_batch_begin(self, batch, logs=None):
        if batch % self.grad_accum == 0:  # the first micro-batch of an optimizer step
            self.lr = self.lr_at(self.state.epoch + self.state.step / self.steps)
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
        self.evaluate = tf_worker.pooled_validation(model, self.loss_fn)

    def on_epoch_end(self, epoch, logs=None):
        logs.update(self.evaluate(self.dataset))


class TrackPosition(tf.keras.callbacks.Callback):
    """Moves the run's position (a `elastic_state.Position` or the elastic state) on after every
    optimizer step (`grad_accum` Keras batches) and epoch; rank 0 checkpoints at every epoch's
    end and every `--checkpoint-every-steps` steps; the elastic state commits every
    `--commit-every` steps and at every epoch's end. Must come after the other callbacks."""

    def __init__(self, args, state, steps_per_epoch: int):
        super().__init__()
        self.args, self.state, self.steps = args, state, steps_per_epoch
        self.last = None

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.args.grad_accum:
            return
        state = self.state
        state.step += 1
        state.global_step += 1
        heartbeat.beat(state.global_step)  # the guard's watchdog
        events.step(state.global_step, self.args.batch_size * self.args.grad_accum * hvd.size())
        # At an epoch's last step the epoch-end checkpoint follows instead.
        if checkpoints.due(state.global_step, self.args.checkpoint_every_steps) and (
            state.step < self.steps
        ):
            self.save(state.epoch, state.step)
        if state.step % self.args.commit_every == 0:
            state.commit()

    def on_epoch_end(self, epoch, logs=None):
        if self.args.elastic and hvd.rank() == 0:
            print(f"epoch {epoch + 1}/{self.args.epochs} - workers: {hvd.size()}", flush=True)
        self.save(self.state.epoch + 1, 0)
        self.state.next_epoch()
        self.state.commit()

    def save(self, epoch: int, step: int) -> None:
        if hvd.rank() == 0 and self.args.checkpoint_dir:
            model = self.model
            global_step = self.state.global_step
            self.last = tf_worker.save_checkpoint(
                self.args, FRAMEWORK, model, model.optimizer, epoch, global_step, step, self.steps
            )


def train(args) -> None:
    tf_worker.setup(args)
    if args.xla:
        tf_worker.enable_xla_autoclustering()
    size = hvd.size()

    peak = schedule.peak_lr(args.base_lr, args.base_batch, args.batch_size * args.grad_accum, size)
    optimizer = distributed_optimizer(args, peak)
    model = keras_models.build_model(args.model, args.image_size, args.num_classes)
    keras_loss.add_weight_decay(model, args.weight_decay)
    tf_worker.print_recipe(args, model, peak, size)
    loss_fn = keras_loss.loss(args.label_smoothing)
    model.compile(
        optimizer=optimizer,
        loss=loss_fn,  # on fp32 logits, also under mixed precision (training.recipe)
        metrics=["accuracy"],
        # Horovod's allreduce has no XLA kernel on CPU, so the whole train step can't be
        # compiled; --xla turns on auto-clustering instead.
        jit_compile=False,
    )
    progress = tf_worker.restore_and_broadcast(
        args, FRAMEWORK, model, optimizer, broadcast=not args.elastic
    )
    epochs = EpochLog(
        args, FRAMEWORK, hvd.rank(), size, allgather_object, args.batch_size * args.grad_accum
    )
    fit = Fit(args, model, loss_fn, epochs)
    position = elastic_state.Position.at(progress)
    if args.elastic:
        state = elastic_state.model_state(model, optimizer, position)
        elastic_state.run(fit, state)
    else:
        fit(position)
    events.end(position.global_step if not args.elastic else state.global_step)
    tf_worker.dump_weights(args, model, hvd.rank())
    checkpoint = fit.track.last if fit.track else None
    epochs.close(
        worker.report(args, FRAMEWORK, fit.meter, fit.source, hvd.size(), hvd.rank(), checkpoint)
    )


def distributed_optimizer(args, peak: float):
    """SGD at `peak` inside Horovod's DistributedOptimizer; under fp16 with the loss scale
    inside Horovod's optimizer: one loss scale per accumulated step, checked on the averaged
    gradients, so every worker skips or applies alike, and Horovod allreduces (and with
    --fp16-allreduce compresses) the scaled gradients (training.tensorflow.loss_scale)."""
    optimizer = tf.keras.optimizers.SGD(learning_rate=peak, momentum=args.momentum)
    if args.precision == "fp16":
        optimizer = loss_scale.loss_scale_optimizer(optimizer)
    return hvd.DistributedOptimizer(
        optimizer,
        compression=tf_worker.compression(args),
        backward_passes_per_step=args.grad_accum,
        average_aggregated_gradients=True,
    )


class Fit:
    """`model.fit` from a position: the rest of a checkpoint's (or elastic commit's) epoch
    first, then the remaining epochs, each on a data stream that starts there."""

    def __init__(self, args, model, loss_fn, epochs: EpochLog):
        self.args, self.model, self.loss_fn, self.epochs = args, model, loss_fn, epochs
        self.track = None

    def __call__(self, state) -> None:
        args, rank, size = self.args, hvd.rank(), hvd.size()
        threads = worker.worker_threads(args, hvd.local_size())

        def data_from(epoch, step):
            return pipeline.make_data(args, rank, size, threads, (epoch, step), allgather_object)

        data = data_from(state.epoch, state.step)
        self.source, steps = data.source, data.steps_per_epoch
        state.align(steps)
        peak = schedule.peak_lr(
            args.base_lr, args.base_batch, args.batch_size * args.grad_accum, size
        )
        self.meter = ThroughputMeter(
            args.batch_size * args.grad_accum * size, args.timing_warmup_steps
        )
        earlier = self.track  # before an elastic reset: its last checkpoint still counts
        self.track = TrackPosition(args, state, steps)
        self.track.last = earlier.last if earlier else None
        validation = None
        if data.validation is not None:
            validation = PooledValidation(data.validation, self.loss_fn)
        callbacks = [
            # Averages the epoch's training metrics over all workers; must come before the
            # callbacks that read them.
            hvd.callbacks.MetricAverageCallback(),
            ScheduledLearningRate(schedule.from_options(args, peak), steps, args.grad_accum, state),
            StepTimer(self.meter, args.grad_accum),
            *([validation] if validation else []),
            EpochMetrics(self.epochs, self.meter),
        ]
        if rank == 0 and args.log_dir:
            callbacks.append(tf.keras.callbacks.TensorBoard(args.log_dir, update_freq="epoch"))
        callbacks.append(self.track)
        with pipeline.explained_data_errors(data.files):
            if state.step and state.epoch < args.epochs:  # the rest of a started epoch
                self.model.fit(
                    data.train,
                    steps_per_epoch=(steps - state.step) * args.grad_accum,
                    epochs=state.epoch + 1,
                    initial_epoch=state.epoch,
                    callbacks=callbacks,
                    verbose=2 if rank == 0 else 0,
                )
                data = data_from(state.epoch, 0)  # a fresh stream: the next fit starts over
                if validation:
                    validation.dataset = data.validation
            if state.epoch < args.epochs:
                self.model.fit(
                    data.train,
                    steps_per_epoch=steps * args.grad_accum,
                    epochs=args.epochs,
                    initial_epoch=state.epoch,
                    callbacks=callbacks,
                    verbose=2 if rank == 0 else 0,
                )


def main(argv=None) -> int:
    return worker.run_main(train, options.parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
