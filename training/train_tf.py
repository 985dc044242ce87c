"""ResNet50 with a TensorFlow custom training loop and Horovod: one process per worker.

    horovodrun --gloo -np 2 -H localhost:2 python -m training.train_tf --image-size 64 ...

Each step: forward under a `tf.GradientTape` wrapped in `hvd.DistributedGradientTape`, which
averages the gradients over all workers (optionally fp16-compressed); the learning rate comes
from training.schedule. Validation accuracy is summed over workers (correct / seen), so it is the
accuracy of all validation images together. Rank 0 alone checkpoints, writes TensorBoard logs
and prints the throughput lines.
"""

import sys
import time

import horovod.tensorflow as hvd
import tensorflow as tf

from training import options, recipe, schedule, tf_common, tf_models, tf_pipeline
from training.throughput import ThroughputMeter

FRAMEWORK = "tf"


def train(args) -> None:
    tf_common.setup(args)
    rank, size = hvd.rank(), hvd.size()
    data = tf_pipeline.make_data(args, rank, size, tf_common.worker_threads(args, hvd.local_size()))
    steps = data.steps_per_epoch

    peak = schedule.peak_lr(args.base_lr, args.base_batch, args.batch_size, size)
    optimizer = tf.keras.optimizers.SGD(learning_rate=peak, momentum=args.momentum)
    fp16 = args.precision == "fp16"
    if fp16:
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    model = tf_models.build_model(args.model, args.image_size, args.num_classes)
    recipe.add_keras_weight_decay(model, args.weight_decay)
    tf_common.print_recipe(args, model, peak, size)
    progress = tf_common.restore_and_broadcast(args, FRAMEWORK, model, optimizer)
    loss_fn = recipe.keras_loss(args.label_smoothing)
    compression = tf_common.compression(args)
    # XLA compiles the model (forward and its gradient); the allreduce stays outside it.
    forward = tf.function(lambda x: model(x, training=True), jit_compile=args.xla)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = forward(images)
            loss = tf.reduce_mean(loss_fn(labels, logits))
            total = loss + tf.add_n(model.losses) if model.losses else loss  # + weight decay
            scaled = optimizer.get_scaled_loss(total) if fp16 else total
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(scaled, model.trainable_variables)
        if fp16:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss, tf_common.correct_predictions(logits, labels)

    lr_at = schedule.from_options(args, peak)
    evaluate = tf_common.pooled_validation(model, loss_fn)

    writer = tf.summary.create_file_writer(args.log_dir) if rank == 0 and args.log_dir else None
    meter = ThroughputMeter(args.batch_size * size, args.timing_warmup_steps)
    start_epoch = progress.epoch if progress else 0
    global_step = progress.global_step if progress else 0
    last_checkpoint = None
    batches = iter(data.train)
    with tf_pipeline.explained_data_errors(data.files):
        for epoch in range(start_epoch, args.epochs):
            started = time.perf_counter()
            # The epoch's sums stay on the device: no host sync per step.
            loss_sum, correct = tf.zeros([]), tf.zeros([], tf.int32)
            for step in range(steps):
                optimizer.learning_rate.assign(lr_at(global_step / steps))
                meter.begin()
                images, labels = next(batches)
                loss, hits = train_step(images, labels)
                loss_sum, correct = loss_sum + tf.cast(loss, tf.float32), correct + hits
                if step == steps - 1 or meter.steps + 1 == args.timing_warmup_steps:
                    loss_sum.numpy()  # the timed window's ends wait for the device: honest timing
                meter.end()
                global_step += 1
            accuracy_sum = tf.cast(correct, tf.float32) / args.batch_size
            means = tf.stack([loss_sum, accuracy_sum]) / steps
            loss_mean, accuracy = hvd.allreduce(means, op=hvd.Average, name="epoch").numpy()
            metrics = {"loss": loss_mean, "accuracy": accuracy}
            metrics["lr"] = lr_at((global_step - 1) / steps)  # the epoch's last step's
            if data.validation is not None:
                metrics.update(evaluate(data.validation))
            if rank == 0:
                shown = " - ".join(f"{k}: {v:.4g}" for k, v in metrics.items())
                took = time.perf_counter() - started
                print(f"epoch {epoch + 1}/{args.epochs} - {steps} steps - {took:.1f}s - {shown}")
                if writer:
                    with writer.as_default(step=epoch + 1):
                        for key, value in metrics.items():
                            tf.summary.scalar(key, value)
                if args.checkpoint_dir:
                    last_checkpoint = tf_common.save_checkpoint(
                        args, FRAMEWORK, model, optimizer, epoch + 1, global_step
                    )
    tf_common.dump_weights(args, model, rank)
    tf_common.report(args, FRAMEWORK, meter, data.source, size, rank, last_checkpoint)


def main(argv=None) -> int:
    return tf_common.run_main(train, options.parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
