"""Cut image/mask pairs into tiles and write them as shards plus the platform's manifest.json.

    .venv-train/bin/python examples/segmentation/prepare_tiles.py \\
        --images scenes/images --masks scenes/masks --out data/landcover \\
        --classes water,tree_canopy,low_vegetation,impervious --tile-size 256

Pairs are matched by file name stem (`images/m_3807504_ne.tif` with `masks/m_3807504_ne.png`).
Images: PNG or TIFF that Pillow reads as RGB or RGBA (4 bands taken as R, G, B, NIR), or .npy
arrays (height x width x 3|4, uint8). Masks: single-band PNG/TIFF or .npy, one class id per
pixel, 255 for no data. Every pair is checked before anything is written: a mask whose size
differs from its image, or a class id beyond the class count, stops the run naming the file.

Whole scenes go to one split (a --validation-fraction of them, at least one), so validation
tiles never border training tiles of the same scene. The output is what `azdl data stage`
uploads and verifies (manifest.json lists every shard with its size and MD5).
"""

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tiles.py beside this file
# The manifest schema is the platform's own (training/data/prepare/manifest.py, stdlib only): the
# example lives in the azdl repository, two folders below its root.
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

import tiles

from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary, file_digests

FORMAT = "azdl.segmentation-tiles/v1"
SUFFIXES = (".png", ".tif", ".tiff", ".npy")


def read_array(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path)
    from PIL import Image

    with Image.open(path) as image:
        if image.mode not in ("RGB", "RGBA", "L", "P"):
            raise tiles.TileError(
                f"{path}: Pillow reads it as mode {image.mode}; convert it to 8-bit RGB, RGBA "
                "(R, G, B, NIR) or single-band, or to .npy (see README, real imagery)"
            )
        return np.asarray(image)


def find_pairs(images: Path, masks: Path) -> list[tuple[Path, Path]]:
    for folder in (images, masks):
        if not folder.is_dir():
            raise tiles.TileError(f"{folder}: no such folder")
    mask_of = {p.stem: p for p in masks.iterdir() if p.suffix.lower() in SUFFIXES}
    pairs, unmatched = [], []
    for image in sorted(p for p in images.iterdir() if p.suffix.lower() in SUFFIXES):
        if image.stem in mask_of:
            pairs.append((image, mask_of[image.stem]))
        else:
            unmatched.append(image.name)
    if unmatched:
        raise tiles.TileError(
            f"no mask in {masks} for {len(unmatched)} image(s): {', '.join(unmatched[:5])}"
        )
    if not pairs:
        raise tiles.TileError(f"no images ({', '.join(SUFFIXES)}) in {images}")
    return pairs


def cut(image: np.ndarray, mask: np.ndarray, size: int):
    """Non-overlapping size x size tiles (the ragged right and bottom edges are left out);
    tiles without a single labelled pixel are skipped."""
    for top in range(0, image.shape[0] - size + 1, size):
        for left in range(0, image.shape[1] - size + 1, size):
            tile_mask = mask[top : top + size, left : left + size]
            if (tile_mask != tiles.IGNORE).any():
                yield top, left, image[top : top + size, left : left + size], tile_mask


def prepare(args: argparse.Namespace) -> Manifest:
    classes = [c.strip() for c in args.classes.split(",") if c.strip()]
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise tiles.TileError(f"--classes {args.classes!r}: give two or more distinct names")
    pairs = find_pairs(Path(args.images), Path(args.masks))
    scenes = []
    bands = None
    for image_path, mask_path in pairs:  # check everything before writing anything
        image, mask = read_array(image_path), read_array(mask_path)
        if mask.ndim == 3 and mask.shape[2] == 1:
            mask = mask[:, :, 0]
        if image.dtype != np.uint8:
            raise tiles.TileError(f"{image_path}: {image.dtype} pixels; expected 8-bit (uint8)")
        tiles.check_pair(image, mask, len(classes), f"{image_path} / {mask_path}")
        if bands is not None and image.shape[2] != bands:
            raise tiles.TileError(f"{image_path}: {image.shape[2]} bands, earlier images {bands}")
        bands = image.shape[2]
        scenes.append((image_path.stem, image, mask))

    random.Random(args.seed).shuffle(scenes)
    n_val = max(1, round(len(scenes) * args.validation_fraction)) if len(scenes) > 1 else 0
    split_scenes = {"validation": scenes[:n_val], "train": scenes[n_val:]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    entries, summaries = [], {}
    for split, members in split_scenes.items():
        encoded, counts = [], np.zeros(len(classes), np.int64)
        for stem, image, mask in members:
            for top, left, tile_image, tile_mask in cut(image, mask, args.tile_size):
                encoded.append((f"{stem}_{top}_{left}", tiles.encode_tile(tile_image, tile_mask)))
                labelled = tile_mask[tile_mask != tiles.IGNORE]
                counts += np.bincount(labelled, minlength=len(classes))[: len(classes)]
        if not encoded:
            if split == "train":
                raise tiles.TileError(f"no {args.tile_size}px training tiles: smaller --tile-size?")
            continue
        num_shards = max(1, min(args.shards, len(encoded)))
        for index in range(num_shards):
            name = f"{split}-{index:05d}-of-{num_shards:05d}"
            part = encoded[index::num_shards]
            tiles.write_shard(out / name, part)
            size, md5, sha256 = file_digests(out / name)
            entries.append(ShardEntry(name, split, len(part), size, md5, sha256))
        summaries[split] = SplitSummary(
            len(encoded), num_shards, {c: int(n) for c, n in zip(classes, counts, strict=True)}
        )
        print(f"{split}: {len(encoded)} tiles from {len(members)} scene(s) in {num_shards} shards")
    manifest = Manifest(
        label_map={name: i for i, name in enumerate(classes)},
        splits=summaries,
        shards=entries,
        options={
            "format": FORMAT,
            "bands": bands,
            "tile_size": args.tile_size,
            "num_classes": len(classes),
            "ignore_index": tiles.IGNORE,
            "class_counts_are": "labelled pixels",
        },
    )
    manifest.write(out)
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", required=True, help="folder of images (PNG, TIFF, .npy)")
    p.add_argument("--masks", required=True, help="folder of masks, same file name stems")
    p.add_argument("--out", required=True, help="folder for the shards and manifest.json")
    p.add_argument("--classes", required=True, help="class names in id order, comma-separated")
    p.add_argument("--tile-size", type=int, default=256, help="tile edge in pixels (default 256)")
    p.add_argument("--shards", type=int, default=8, help="shards per split, at most (default 8)")
    p.add_argument("--validation-fraction", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.tile_size < 8 or args.shards < 1 or not 0 < args.validation_fraction < 1:
        p.error("--tile-size >= 8, --shards >= 1 and 0 < --validation-fraction < 1")
    try:
        prepare(args)
    except tiles.TileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
