"""A small image set a CNN has to *learn*: four classes told apart by the orientation of edges only.

Class 0 horizontal stripes, 1 vertical stripes, 2 a checkerboard, 3 a diagonal checkerboard
(diamonds). Each image has two random colours, a random period (6-12 px) and phase, random size
and aspect, and grain; none of that depends on the class, so colour, brightness or texture
energy tell nothing: only oriented filters separate the classes. Every class is its own mirror
image (the training flip keeps its label), and stays itself under crops of 8-100 % area at
aspect 3/4-4/3. Written as JPEG files in ImageNet layout, then sharded by the project's own
converter (training/data/prepare/convert.py), so the test reads what `azdl data prepare` writes.
"""

import numpy as np
from PIL import Image

CLASSES = ("horizontal", "vertical", "checker", "diamonds")


def pattern(rng: np.random.Generator, label: int) -> np.ndarray:
    h, w = (int(x) for x in rng.integers(40, 65, size=2))
    period = rng.uniform(6, 12)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32) + rng.uniform(0, period, size=2)[:, None, None]
    wave = {
        0: lambda: np.sin(2 * np.pi * y / period),
        1: lambda: np.sin(2 * np.pi * x / period),
        2: lambda: np.sin(2 * np.pi * y / period) * np.sin(2 * np.pi * x / period),
        3: lambda: np.sin(np.pi * (x + y) / period) * np.sin(np.pi * (x - y) / period),
    }[label]()
    mask = (wave > 0).astype(np.float32)[..., None]
    ink, paper = rng.integers(0, 256, size=(2, 3))
    pixels = mask * ink + (1 - mask) * paper + rng.normal(0, 20, size=(h, w, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def write_folders(root, train_per_class: int, validation_per_class: int, seed: int = 0):
    """`root/train/<wnid>/*.JPEG` and `root/validation/<wnid>/*.JPEG` (the converter's input)."""
    rng = np.random.default_rng(seed)
    for split, count in (("train", train_per_class), ("validation", validation_per_class)):
        for label in range(len(CLASSES)):
            folder = root / split / f"n{label + 1:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                image = Image.fromarray(pattern(rng, label))
                image.save(folder / f"{CLASSES[label]}_{i}.JPEG", "JPEG", quality=90)
    return root
