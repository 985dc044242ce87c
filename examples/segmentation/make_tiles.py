"""Generate aerial-like scenes with land-cover masks, for local runs and tests.

    .venv-train/bin/python examples/segmentation/make_tiles.py --out scenes --scenes 8

Writes `OUT/images/scene-NNN.png` (RGBA: R, G, B and NIR in the fourth band, or RGB with
--bands 3) and `OUT/masks/scene-NNN.png` (class ids), the layout prepare_tiles.py reads. Four
classes after the Chesapeake land-cover scheme's main ones: water, tree canopy, low
vegetation, impervious. Each class has its own spectral signature (water dark with almost no
NIR, vegetation bright in NIR), blurred into its neighbours and overlaid with noise and
texture, in irregular regions, so a model must use context as well as colour.
"""

import argparse
from pathlib import Path

import numpy as np

CLASSES = ("water", "tree_canopy", "low_vegetation", "impervious")
# mean R, G, B, NIR per class (uint8 scale), in CLASSES order
SIGNATURES = np.array(
    [[40, 60, 90, 20], [45, 85, 45, 170], [110, 140, 80, 140], [130, 125, 120, 90]], np.float32
)


def blur(field: np.ndarray, radius: int) -> np.ndarray:
    """Box blur along both image axes (a running mean, edges clamped)."""
    for axis in (0, 1):
        pad = [(0, 0)] * field.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(field, pad, mode="edge")
        csum = np.cumsum(padded, axis=axis, dtype=np.float64)
        csum = np.concatenate([np.zeros_like(csum.take([0], axis=axis)), csum], axis=axis)
        n = field.shape[axis]
        width = 2 * radius + 1
        field = csum.take(range(width, n + width), axis=axis) - csum.take(range(n), axis=axis)
        field = field / width
    return field


def scene(rng: np.random.Generator, size: int, bands: int) -> tuple[np.ndarray, np.ndarray]:
    """One (image, mask) pair of `size` x `size` pixels."""
    k = len(CLASSES)
    regions = rng.normal(size=(size, size, k))
    for _ in range(3):  # three box blurs: close to a Gaussian, so regions have smooth edges
        regions = blur(regions, radius=max(2, size // 24))
    mask = regions.argmax(axis=2).astype(np.uint8)
    image = SIGNATURES[mask].copy()
    image = blur(image, radius=1)  # soft borders between classes
    texture = blur(rng.normal(size=(size, size, 1)), radius=2) * 60  # shared texture, all bands
    image += texture + rng.normal(scale=18, size=image.shape)
    image = np.clip(image, 0, 255).astype(np.uint8)
    return image[:, :, :bands], mask


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for images/ and masks/")
    p.add_argument("--scenes", type=int, default=8, help="number of scenes (default 8)")
    p.add_argument("--size", type=int, default=256, help="scene edge in pixels (default 256)")
    p.add_argument("--bands", type=int, choices=(3, 4), default=4, help="RGB or RGB+NIR")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from PIL import Image

    rng = np.random.default_rng(args.seed)
    out = Path(args.out)
    for sub in ("images", "masks"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for i in range(args.scenes):
        image, mask = scene(rng, args.size, args.bands)
        Image.fromarray(image).save(out / "images" / f"scene-{i:03d}.png")
        Image.fromarray(mask).save(out / "masks" / f"scene-{i:03d}.png")
    print(f"wrote {args.scenes} scenes of {args.size}px to {out} (classes: {','.join(CLASSES)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
