"""A tiny ImageNet-layout dataset of real JPEG files, for tests, demos and benchmarks.

    python -m training.data.prepare.sample OUT [--classes 4] [--train-per-class 12] ...

Writes `OUT/train/<wnid>/<wnid>_<i>.JPEG` and validation images either flat with a labels
file (`OUT/validation/*.JPEG` + `OUT/validation_labels.txt`, as ImageNet ships them) or in
class folders. Each class has its own colour and shapes, so a model can learn something.
`--messy` adds what real ImageNet contains: a PNG named `.JPEG` and a CMYK JPEG.
"""

import argparse
import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw

from training.data.prepare.options import SAMPLE_OPTIONS, add_options

LABELS_FILE = "validation_labels.txt"  # the converter looks for it by this name


def wnid(index: int) -> str:
    return f"n{index + 1:08d}"


def _image(rng: random.Random, class_index: int, size: int) -> Image.Image:
    # Vary the aspect ratio like ImageNet photos do; colour and shape depend on the class.
    w = rng.randint(size * 3 // 4, size * 5 // 4)
    h = rng.randint(size * 3 // 4, size * 5 // 4)
    hue = (class_index * 67) % 256
    base = (hue, 255 - hue, (hue * 3) % 256)
    img = Image.new("RGB", (w, h), base)
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = x0 + rng.randint(8, w // 2), y0 + rng.randint(8, h // 2)
        colour = tuple(min(255, max(0, c + rng.randint(-60, 60))) for c in base[::-1])
        shape = draw.ellipse if class_index % 2 else draw.rectangle
        shape([x0, y0, x1, y1], fill=colour)
    # Grain gives the JPEGs about a photo's entropy (~0.6 bytes per pixel; ImageNet ~0.8), so
    # decoding them costs what decoding photos does.
    grain = Image.effect_noise((w, h), 64).convert("RGB")
    return Image.blend(img, grain, 0.4)


def generate(
    out: Path,
    classes: int = 4,
    train_per_class: int = 12,
    validation_per_class: int = 3,
    size: int = 128,
    validation_layout: str = "flat",
    messy: bool = False,
    seed: int = 0,
) -> dict[str, int]:
    """Write the dataset; return the number of images per split."""
    rng = random.Random(seed)
    out = Path(out)
    counts = {"train": 0, "validation": 0}
    labels: list[str] = []
    for c in range(classes):
        train_dir = out / "train" / wnid(c)
        train_dir.mkdir(parents=True, exist_ok=True)
        for i in range(train_per_class):
            _image(rng, c, size).save(train_dir / f"{wnid(c)}_{i}.JPEG", "JPEG", quality=90)
            counts["train"] += 1
        for _ in range(validation_per_class):
            counts["validation"] += 1
            name = f"ILSVRC2012_val_{counts['validation']:08d}.JPEG"
            folder = out / "validation" / (wnid(c) if validation_layout == "folders" else "")
            folder.mkdir(parents=True, exist_ok=True)
            _image(rng, c, size).save(folder / name, "JPEG", quality=90)
            labels.append(f"{name} {wnid(c)}")
    if validation_layout == "flat" and labels:
        (out / LABELS_FILE).write_text("\n".join(labels) + "\n")
    if messy:
        first = out / "train" / wnid(0)
        _image(rng, 0, size).save(first / f"{wnid(0)}_png.JPEG", "PNG")
        _image(rng, 0, size).convert("CMYK").save(first / f"{wnid(0)}_cmyk.JPEG", "JPEG")
        counts["train"] += 2
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="azdl data sample", description="Write a tiny ImageNet-layout dataset of real JPEGs."
    )
    add_options(p, SAMPLE_OPTIONS)
    args = p.parse_args(argv)
    minimum = {"classes": 1, "train_per_class": 1, "validation_per_class": 0, "size": 16}
    for name, least in minimum.items():
        if getattr(args, name) < least:
            p.error(
                f"--{name.replace('_', '-')} must be at least {least}, got {getattr(args, name)}"
            )
    if any((args.output / split).exists() for split in ("train", "validation")):
        p.error(f"{args.output} already holds train/ or validation/; choose an empty folder")
    counts = generate(
        args.output,
        args.classes,
        args.train_per_class,
        args.validation_per_class,
        args.size,
        args.validation_layout,
        args.messy,
        args.seed,
    )
    print(
        f"wrote {counts['train']} train and {counts['validation']} validation images "
        f"in {args.classes} classes to {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
