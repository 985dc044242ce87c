"""The tile-shard format of the segmentation example (numpy and the standard library only).

A shard is an uncompressed tar file named like the platform's shards (`train-00000-of-00008`,
`validation-00000-of-00002`), so `azdl data stage` uploads it against its manifest, and the
`copy` and `nfs` storage modes and each worker's share by global rank work unchanged. Each
member is one tile, `<name>.npz`, holding two arrays:

    image  uint8, height x width x bands   (bands 3: R, G, B; bands 4: R, G, B, NIR)
    mask   uint8, height x width           (class id per pixel; 255 = no data, ignored)
"""

import io
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

IGNORE = 255  # mask value for pixels without a label (no data); never a class
BANDS = (3, 4)
SPLITS = ("train", "validation")
_SHARD = re.compile(r"^(train|validation)-\d{5}-of-\d{5}$")


class TileError(ValueError):
    """A tile or shard that does not follow the format; the message names the file."""


def check_pair(image: np.ndarray, mask: np.ndarray, num_classes: int, source: str) -> None:
    """A clear error, naming `source`, for an image/mask pair training can't use."""
    if image.ndim != 3 or image.shape[2] not in BANDS:
        raise TileError(
            f"{source}: image has shape {image.shape}; expected height x width x bands "
            f"with {' or '.join(map(str, BANDS))} bands (R, G, B[, NIR])"
        )
    if mask.ndim != 2:
        raise TileError(f"{source}: mask has shape {mask.shape}; expected height x width")
    if mask.shape != image.shape[:2]:
        raise TileError(
            f"{source}: mask is {mask.shape[0]}x{mask.shape[1]} pixels but its image is "
            f"{image.shape[0]}x{image.shape[1]}; a mask must cover its image pixel for pixel"
        )
    labelled = mask[mask != IGNORE]
    if labelled.size and int(labelled.max()) >= num_classes:
        bad = sorted({int(v) for v in np.unique(labelled) if v >= num_classes})
        count = int(np.isin(labelled, bad).sum())
        raise TileError(
            f"{source}: mask has class id(s) {', '.join(map(str, bad))} at {count} pixel(s); "
            f"allowed: 0..{num_classes - 1} ({num_classes} classes) and {IGNORE} for no data"
        )


def encode_tile(image: np.ndarray, mask: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, image=image.astype(np.uint8), mask=mask.astype(np.uint8))
    return buffer.getvalue()


def write_shard(path: Path, tiles: list[tuple[str, bytes]]) -> None:
    """Write (name, encoded tile) pairs as one tar shard (atomically)."""
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name, data in tiles:
            info = tarfile.TarInfo(f"{name}.npz")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(path)


def read_shard(path: str | Path, num_classes: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The (image, mask) tiles of one shard, each checked."""
    try:
        with tarfile.open(path, "r") as tar:
            for member in tar:
                if not member.isfile() or not member.name.endswith(".npz"):
                    continue
                source = f"{path}:{member.name}"
                with np.load(io.BytesIO(tar.extractfile(member).read())) as arrays:
                    if "image" not in arrays or "mask" not in arrays:
                        raise TileError(f"{source}: expected arrays 'image' and 'mask'")
                    image, mask = arrays["image"], arrays["mask"]
                check_pair(image, mask, num_classes, source)
                yield image, mask
    except (tarfile.TarError, OSError, ValueError) as exc:
        if isinstance(exc, TileError):
            raise
        raise TileError(f"{path}: not a readable tile shard ({exc})") from None


def list_shards(data_dir: str | Path, split: str) -> list[str]:
    """Sorted shard paths of `split` in `data_dir`; a clear error if there are none."""
    root = Path(data_dir)
    if not root.is_dir():
        raise TileError(f"data folder {root} does not exist")
    shards = sorted(
        str(p) for p in root.iterdir() if _SHARD.match(p.name) and p.name.startswith(split + "-")
    )
    if not shards:
        raise TileError(f"no {split} shards in {root} (files named like {split}-00000-of-00004)")
    return shards
