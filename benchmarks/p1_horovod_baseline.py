"""The P1 baseline: Horovod's own Keras synthetic benchmark, re-implemented from its settings.

Reproduces `examples/tensorflow2/tensorflow2_keras_synthetic_benchmark.py` (Horovod 0.28.1)
faithfully: a `tf.keras.applications` model with random weights and its softmax head,
`SGD(0.01)` wrapped in `hvd.DistributedOptimizer` (optional fp16 compression), sparse
categorical cross-entropy, one random batch of uniform images and labels cached and repeated,
`BroadcastGlobalVariablesCallback(0)` and `MetricAverageCallback()`, and its timing: each
"iteration" is one Keras epoch of `--num-batches-per-iter` batches, img/sec = batch × batches /
epoch time, the first iteration skipped, total = mean × workers.

Its defaults are the original's (ResNet50, 224 px, batch 32, 10 × 10 batches). Two additions,
both defaulting to the original's fixed values: `--image-size` and `--num-classes`, so P1 can
run at CPU-sized settings. Run it like the original, one process per worker:

    horovodrun --gloo -np 2 -H localhost:2 python benchmarks/p1_horovod_baseline.py
"""

import argparse
import json
from timeit import default_timer as timer

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--fp16-allreduce", action="store_true")
parser.add_argument("--model", default="ResNet50")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-batches-per-iter", type=int, default=10)
parser.add_argument("--num-iters", type=int, default=10)
parser.add_argument("--image-size", type=int, default=224)
parser.add_argument("--num-classes", type=int, default=1000)
args = parser.parse_args()

hvd.init()

model = getattr(tf.keras.applications, args.model)(
    weights=None, input_shape=(args.image_size, args.image_size, 3), classes=args.num_classes
)
images = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
labels = tf.random.uniform([args.batch_size, 1], maxval=args.num_classes - 1, dtype=tf.int64)
dataset = (
    tf.data.Dataset.from_tensor_slices((images, labels)).cache().repeat().batch(args.batch_size)
)
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
model.compile(
    loss=tf.losses.SparseCategoricalCrossentropy(),
    optimizer=hvd.DistributedOptimizer(tf.optimizers.SGD(0.01), compression=compression),
    experimental_run_tf_function=False,
)


class IterationTimer(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.rates = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = timer()

    def on_epoch_end(self, epoch, logs=None):
        rate = args.batch_size * args.num_batches_per_iter / (timer() - self.start)
        if epoch > 0:  # the first iteration is warm-up
            self.rates.append(rate)


timing = IterationTimer()
model.fit(
    dataset,
    steps_per_epoch=args.num_batches_per_iter,
    epochs=args.num_iters,
    callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        timing,
    ],
    verbose=0,
)
if hvd.rank() == 0:
    mean, conf = np.mean(timing.rates), 1.96 * np.std(timing.rates)
    print(f"Img/sec per CPU: {mean:.1f} +-{conf:.1f}")
    print(
        f"Total img/sec on {hvd.size()} CPU(s): {hvd.size() * mean:.1f} +-{hvd.size() * conf:.1f}"
    )
    print(json.dumps({"baseline_images_per_sec": hvd.size() * mean, "workers": hvd.size()}))
