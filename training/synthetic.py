"""The synthetic data source: one deterministic global batch, served over and over (NumPy only).

Like Horovod's synthetic benchmarks, the input costs nothing after the first step, so the figures
measure the model and the allreduce. Unlike them, the images are learnable (each class has its
own colour under the noise), so a short run shows the loss going down; and the batch is
defined globally and sliced by rank, so 2 workers × batch b see exactly the images that
1 worker × batch 2b sees — the identity the averaging test relies on.
"""

import numpy as np

IMAGENET_TRAIN_IMAGES = 1_281_167
IMAGENET_VALIDATION_IMAGES = 50_000


def global_batch(
    size: int, image_size: int, num_classes: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`size` images (NHWC float32 in [0, 1)) and int64 labels, the same for every caller."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=size, dtype=np.int64)
    noise = rng.random((size, image_size, image_size, 3), dtype=np.float32)
    colours = np.stack([np.random.default_rng([seed, int(c)]).random(3) for c in labels])
    images = 0.5 * noise + 0.5 * colours[:, None, None, :]
    return images.astype(np.float32), labels


def rank_batch(
    batch_per_worker: int,
    rank: int,
    workers: int,
    image_size: int,
    num_classes: int,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank `rank`'s slice of the global batch of `batch_per_worker × workers` images."""
    images, labels = global_batch(batch_per_worker * workers, image_size, num_classes, seed)
    part = slice(rank * batch_per_worker, (rank + 1) * batch_per_worker)
    return images[part], labels[part]


def steps_per_epoch(length: int, batch_per_worker: int, workers: int) -> int:
    """Synchronous steps that cover `length` images once (at least one)."""
    return max(1, length // (batch_per_worker * workers))
