"""The synthetic data source: one deterministic batch per worker, served over and over (NumPy only).

Like Horovod's synthetic benchmarks, the input costs nothing after the first step, so the figures
measure the model and the allreduce. Unlike them, the images are learnable (each class has its
own colour under the noise), so a short run shows the loss going down. Every sample is made from
its own generator, keyed by the seed and its index in the global batch, so a worker makes only
its own slice and 2 workers × batch b still see exactly the images that 1 worker × batch 2b
sees — the identity the averaging test relies on.
"""

import numpy as np

GOLDEN = 0.6180339887  # hue step between classes: neighbouring classes far apart on the wheel


def samples(
    first: int, count: int, image_size: int, num_classes: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Samples `first` … `first + count - 1` of the global sequence: NHWC float32 images in
    [-0.5, 0.5) (centred, like normalised pixels: the tiny test model learns them in a few
    steps) and int64 labels, the same whichever process makes them."""
    images = np.empty((count, image_size, image_size, 3), dtype=np.float32)
    labels = np.empty(count, dtype=np.int64)
    for i in range(count):
        rng = np.random.default_rng([seed, first + i])
        labels[i] = rng.integers(num_classes)
        rng.random(out=images[i], dtype=np.float32)
    images *= 0.5
    images += 0.5 * class_colours(labels)[:, None, None, :] - 0.5
    return images, labels


def class_colours(labels: np.ndarray) -> np.ndarray:
    """An RGB colour in [0, 1] per label: its own hue on a colour wheel (float32)."""
    hues = (labels * GOLDEN) % 1.0
    wheel = 0.5 + 0.5 * np.cos(2 * np.pi * (hues[:, None] - np.array([0, 1 / 3, 2 / 3])))
    return wheel.astype(np.float32)


def rank_batch(
    batch_per_worker: int,
    rank: int,
    workers: int,
    image_size: int,
    num_classes: int,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank `rank`'s slice of the global batch of `batch_per_worker × workers` images (only the
    slice is made: 256 images at 224 px are 154 MB, the global batch of 64 workers 10 GB)."""
    if not 0 <= rank < workers:
        raise ValueError(f"rank {rank} is outside 0..{workers - 1}")
    return samples(rank * batch_per_worker, batch_per_worker, image_size, num_classes, seed)
