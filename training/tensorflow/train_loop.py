"""ResNet50 with a TensorFlow custom training loop and Horovod: one process per worker.

    horovodrun --gloo -np 2 -H localhost:2 python -m training.tensorflow.train_loop \\
        --image-size 64 ...

Each step runs under `hvd.DistributedGradientTape` (docs/architecture.md, "The TF loop").
`--elastic`: Horovod elastic training (training.tensorflow.elastic_state).
"""

import sys
import time

import horovod.tensorflow as hvd
import tensorflow as tf

from training import checkpoints, events, heartbeat, options, schedule, worker
from training.epoch_log import EpochLog
from training.tensorflow import elastic_state, keras_loss, keras_models, pipeline, tf_worker
from training.throughput import ThroughputMeter

FRAMEWORK = "tf"


def train(args) -> None:
    tf_worker.setup(args)
    size = hvd.size()

    peak = schedule.peak_lr(args.base_lr, args.base_batch, args.batch_size, size)
    optimizer = tf.keras.optimizers.SGD(learning_rate=peak, momentum=args.momentum)
    fp16 = args.precision == "fp16"
    if fp16:
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    model = keras_models.build_model(args.model, args.image_size, args.num_classes)
    keras_loss.add_weight_decay(model, args.weight_decay)
    tf_worker.print_recipe(args, model, peak, size)
    progress = tf_worker.restore_and_broadcast(
        args, FRAMEWORK, model, optimizer, broadcast=not args.elastic
    )
    loss_fn = keras_loss.loss(args.label_smoothing)  # on fp32 logits, also under fp16/bf16
    compression = tf_worker.compression(args)
    # XLA compiles the model (forward and its gradient); the allreduce stays outside it.
    forward = tf.function(lambda x: model(x, training=True), jit_compile=args.xla)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = forward(images)
            loss = tf.reduce_mean(loss_fn(labels, logits))
            total = loss + tf.add_n(model.losses) if model.losses else loss  # + weight decay
            # fp16: the loss scale is the same on every worker (broadcast, then updated from
            # the allreduced gradients), so the averaged gradients share one scale.
            scaled = optimizer.get_scaled_loss(total) if fp16 else total
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(scaled, model.trainable_variables)
        if fp16:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss, tf_worker.correct_predictions(logits, labels)

    loop = Loop(args, model, optimizer, train_step, loss_fn)
    position = elastic_state.Position.at(progress)
    if args.elastic:
        state = elastic_state.model_state(model, optimizer, position)
        elastic_state.run(loop, state)
    else:
        loop(position)
    events.end(position.global_step if not args.elastic else state.global_step)
    tf_worker.dump_weights(args, model, hvd.rank())
    result = worker.report(
        args, FRAMEWORK, loop.meter, loop.data.source, hvd.size(), hvd.rank(), loop.checkpoint
    )
    loop.epochs.close(result)


class Loop:
    """The training loop from a position (a `elastic_state.Position`, or the elastic state, which
    `elastic_state.run` calls this again with after a change of workers)."""

    def __init__(self, args, model, optimizer, train_step, loss_fn):
        self.args, self.model, self.optimizer, self.train_step = args, model, optimizer, train_step
        self.evaluate = tf_worker.pooled_validation(model, loss_fn)
        self.writer = None
        if hvd.rank() == 0 and args.log_dir:
            self.writer = tf.summary.create_file_writer(args.log_dir)
        self.epochs = EpochLog(
            args, FRAMEWORK, hvd.rank(), hvd.size(), hvd.allgather_object, args.batch_size
        )
        self.checkpoint = None

    def __call__(self, state) -> None:
        args, rank, size = self.args, hvd.rank(), hvd.size()
        threads = worker.worker_threads(args, hvd.local_size())
        # The data stream starts where the state stands, for this rank of this many workers.
        self.data = pipeline.make_data(
            args, rank, size, threads, (state.epoch, state.step), hvd.allgather_object
        )
        steps = self.data.steps_per_epoch
        state.align(steps)
        peak = schedule.peak_lr(args.base_lr, args.base_batch, args.batch_size, size)
        lr_at = schedule.from_options(args, peak)
        self.meter = ThroughputMeter(args.batch_size * size, args.timing_warmup_steps)
        batches = iter(self.data.train)
        with pipeline.explained_data_errors(self.data.files):
            while state.epoch < args.epochs:
                started = time.perf_counter()
                self.epochs.begin_epoch()
                # The loss and hits since the state last took them stay on the device: no
                # host sync per step (only at the timed window's ends and at commits).
                sums = DeviceSums()
                while state.step < steps:
                    self.optimizer.learning_rate.assign(lr_at(state.epoch + state.step / steps))
                    self.meter.begin()
                    images, labels = next(batches)
                    sums.add(*self.train_step(images, labels))
                    if state.step == steps - 1 or self.meter.steps + 1 == args.timing_warmup_steps:
                        sums.wait()  # the timed window's ends wait for the device: honest timing
                    self.meter.end()
                    state.images += args.batch_size
                    state.step += 1
                    state.global_step += 1
                    heartbeat.beat(state.global_step)  # the guard's watchdog
                    events.step(state.global_step, args.batch_size * size)
                    if checkpoints.due(state.global_step, args.checkpoint_every_steps):
                        self.save(state)
                    if args.elastic and state.step % args.commit_every == 0:
                        sums.move_to(state)  # a rollback goes back to the committed sums
                        state.commit()
                sums.move_to(state)
                self.end_epoch(state, steps, lr_at, time.perf_counter() - started)
                state.next_epoch()
                state.commit()

    def end_epoch(self, state, steps, lr_at, took) -> None:
        args = self.args
        ran = max(state.images // args.batch_size, 1)  # steps since the epoch began or resumed
        means = tf.constant([state.loss_sum / ran, state.correct / max(state.images, 1)])
        loss_mean, accuracy = hvd.allreduce(means, op=hvd.Average, name="epoch").numpy()
        metrics = {"loss": loss_mean, "accuracy": accuracy}
        metrics["lr"] = lr_at(state.epoch + (steps - 1) / steps)  # the epoch's last step's
        if self.data.validation is not None:
            metrics.update(self.evaluate(self.data.validation))
        self.epochs.end_epoch(state.epoch + 1, metrics, self.meter)
        if hvd.rank() == 0:
            shown = " - ".join(f"{k}: {v:.4g}" for k, v in metrics.items())
            shown_steps = f"{steps} steps" if ran == steps else f"{ran} of {steps} steps"
            workers = f" - workers: {hvd.size()}" if args.elastic else ""
            print(
                f"epoch {state.epoch + 1}/{args.epochs} - {shown_steps} - {took:.1f}s - "
                f"{shown}{workers}",
                flush=True,
            )
            if self.writer:
                with self.writer.as_default(step=state.epoch + 1):
                    for key, value in metrics.items():
                        tf.summary.scalar(key, value)
        self.save(state, epoch_end=True)

    def save(self, state, epoch_end: bool = False) -> None:
        """Rank 0: a checkpoint at the epoch's end or mid-epoch (`--checkpoint-every-steps`)."""
        if hvd.rank() != 0 or not self.args.checkpoint_dir:
            return
        epoch, step = (state.epoch + 1, 0) if epoch_end else (state.epoch, state.step)
        steps = self.data.steps_per_epoch
        if step == steps:
            return  # the epoch's last step: the epoch-end checkpoint follows
        self.checkpoint = tf_worker.save_checkpoint(
            self.args, FRAMEWORK, self.model, self.optimizer, epoch, state.global_step, step, steps
        )


class DeviceSums:
    """The training loss and correct predictions of the steps since the last `move_to`, summed
    where the steps ran."""

    def __init__(self):
        self.loss, self.correct = tf.zeros([]), tf.zeros([], tf.int32)

    def add(self, loss, hits) -> None:
        self.loss, self.correct = self.loss + tf.cast(loss, tf.float32), self.correct + hits

    def wait(self) -> None:
        self.loss.numpy()

    def move_to(self, state) -> None:
        """Add the sums to the state's (Python numbers, which an elastic commit saves)."""
        state.loss_sum += float(self.loss)
        state.correct += int(self.correct)
        self.__init__()


def main(argv=None) -> int:
    return worker.run_main(train, options.parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
