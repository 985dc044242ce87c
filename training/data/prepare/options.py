"""Command-line options of the data tools, defined once (stdlib only).

The training-side modules parse them, and `azdl data …` registers the same options in the
operator's CLI (so `--help` works there) and turns the parsed values back into the argument
list it hands to the training environment.
"""

import argparse
from pathlib import Path

Option = tuple[str, dict]

# Shards per split when --train-shards / --validation-shards are left out: ImageNet's usual
# split (about 1,250 train and 390 validation images, 100-140 MB, per shard).
DEFAULT_SHARDS = {"train": 1024, "validation": 128}

SAMPLE_OPTIONS: list[Option] = [
    ("output", dict(type=Path, help="folder to create (must not hold train/ or validation/)")),
    ("--classes", dict(type=int, default=4, help="number of classes (default 4)")),
    ("--train-per-class", dict(type=int, default=12, help="train images per class (default 12)")),
    ("--validation-per-class", dict(type=int, default=3, help="validation images per class (3)")),
    ("--size", dict(type=int, default=128, help="typical image side in pixels (default 128)")),
    (
        "--validation-layout",
        dict(
            choices=["flat", "folders"],
            default="flat",
            help="flat: validation/*.JPEG plus validation_labels.txt, as ImageNet ships them "
            "(default); folders: validation/<wnid>/*.JPEG",
        ),
    ),
    ("--messy", dict(action="store_true", help="add a PNG named .JPEG and a CMYK JPEG")),
    ("--seed", dict(type=int, default=0, help="random seed (default 0)")),
]

PREPARE_OPTIONS: list[Option] = [
    (
        "--input",
        dict(
            type=Path,
            required=True,
            help="ImageNet-layout folder: train/<wnid>/*.JPEG, "
            "validation/*.JPEG (with --validation-labels) or validation/<wnid>/*.JPEG",
        ),
    ),
    ("--output", dict(type=Path, required=True, help="folder for the shards and manifest.json")),
    (
        "--validation-labels",
        dict(
            type=Path,
            help="labels of flat validation images: lines "
            "'<file> <wnid>' (or 'ImageId,wnid …' CSV), or one wnid per line "
            "in sorted file order; default: <input>/validation_labels.txt "
            "if present",
        ),
    ),
    (
        "--splits",
        dict(
            default="train,validation",
            help="comma-separated splits to convert (default train,validation)",
        ),
    ),
    (
        "--train-shards",
        dict(type=int, help="train shards (default 1024, or one per image when there are fewer)"),
    ),
    (
        "--validation-shards",
        dict(type=int, help="validation shards (default 128, or one per image when fewer)"),
    ),
    (
        "--reencode",
        dict(
            action="store_true",
            help="re-encode every image as JPEG (otherwise "
            "only PNG, CMYK and other non-RGB files are re-encoded)",
        ),
    ),
    ("--quality", dict(type=int, default=90, help="JPEG quality when re-encoding (default 90)")),
    (
        "--resize",
        dict(
            type=int,
            metavar="PIXELS",
            help="scale images down so the shorter side is "
            "at most PIXELS (re-encodes those images)",
        ),
    ),
    (
        "--max-size",
        dict(
            type=int,
            metavar="PIXELS",
            help="scale images down so the longer side is at most PIXELS (re-encodes those "
            "images; default: stored as they are, as NVIDIA's recipes store ImageNet). Trades a "
            "little accuracy for less decoding and resizing per step: see docs/data.md",
        ),
    ),
    ("--workers", dict(type=int, help="worker processes (default: all cores)")),
    (
        "--skip-bad",
        dict(
            action="store_true",
            help="leave unreadable images out (recorded in the manifest) instead of failing",
        ),
    ),
    ("--overwrite", dict(action="store_true", help="replace shards already in --output")),
    ("--seed", dict(type=int, default=0, help="seed of the shuffle across shards (default 0)")),
]


def add_options(parser: argparse.ArgumentParser, options: list[Option]) -> None:
    for name, kwargs in options:
        parser.add_argument(name, **kwargs)


def to_argv(args: argparse.Namespace, options: list[Option]) -> list[str]:
    """The argument list that parses back to `args` under the same options."""
    argv: list[str] = []
    for name, kwargs in options:
        value = getattr(args, name.lstrip("-").replace("-", "_"))
        if not name.startswith("-"):
            argv.append(str(value))
        elif kwargs.get("action") == "store_true":
            argv += [name] if value else []
        elif value is not None:
            argv += [name, str(value)]
    return argv
