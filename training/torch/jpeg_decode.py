"""CPU decode: one JPEG's crop window decoded (at a reduced DCT scale where that is faster) and
resized to the training size, uint8 HWC."""

import io
import math

import numpy as np
import simplejpeg
import torch
import torch.nn.functional as F
from PIL import Image

# libjpeg-turbo decodes at n/8 of the full size for n = 1..16, but only ½, ¼ and ⅛ are faster
# than a full decode (median ms per 100-130 kB JPEG, measured here: full 1.03, 7/8 1.75,
# 6/8 1.45, 5/8 1.30, 1/2 0.93): the other scales resample in the IDCT. The CPU path asks only
# for these factors; benchmarks/torch_input_pipeline.py measures the choice against any scale.
FAST_DCT_FACTORS = (8, 4, 2)


def dct_factor(full: tuple[int, int], need: tuple[int, int], factors=FAST_DCT_FACTORS) -> int:
    """The largest of `factors` (else 1) at which a full × full JPEG decodes to at least `need`
    pixels (libjpeg rounds a scaled side up)."""
    for factor in factors:
        if all(-(-side // factor) >= want for side, want in zip(full, need, strict=True)):
            return factor
    return 1


def decode_scale(window, full: tuple[int, int], size: int, factors=FAST_DCT_FACTORS) -> dict:
    """simplejpeg's scaling arguments for decoding `window` of a full-size JPEG to `size`."""
    _, _, height, width = (int(v) for v in window)
    need = (math.ceil(full[0] * size / height), math.ceil(full[1] * size / width))
    if factors is None:
        return {"min_height": need[0], "min_width": need[1]}
    factor = dct_factor(full, need, factors)
    if factor == 1:
        return {}  # full size
    return {
        "min_height": -(-full[0] // factor),
        "min_width": -(-full[1] // factor),
        "min_factor": factor,  # or libjpeg may take a smaller, slower n/8 scale
    }


def decode_crop_resize(
    jpeg: bytes, window, full: tuple[int, int], size: int, flip: bool, factors=FAST_DCT_FACTORS
) -> torch.Tensor:
    """One JPEG → its window resized to size × size (bilinear, antialiased), uint8 HWC.

    Decoded by libjpeg-turbo through simplejpeg, with the fast integer IDCT (tf.image's default
    too) and, when the window is at least 2, 4 or 8 times larger than the output, at ½, ¼ or ⅛
    of the size (DCT scaling: far less work; `factors=None` lets libjpeg pick any n/8 scale, the
    slower old way the benchmark compares with). JPEGs it refuses (CMYK, …) go through Pillow.
    The resize is torch's uint8 antialiased bilinear kernel (vectorised for channels-last)."""
    top, left, height, width = (int(v) for v in window)
    full_h, full_w = full
    scale = decode_scale(window, full, size, factors)
    try:
        pixels = simplejpeg.decode_jpeg(jpeg, colorspace="RGB", fastdct=True, **scale)
    except ValueError:
        with Image.open(io.BytesIO(jpeg)) as img:
            pixels = np.array(img.convert("RGB"))
    sy, sx = pixels.shape[0] / full_h, pixels.shape[1] / full_w
    y0, x0 = int(top * sy), int(left * sx)
    y1 = max(y0 + 1, round((top + height) * sy))
    x1 = max(x0 + 1, round((left + width) * sx))
    crop = torch.from_numpy(pixels[y0:y1, x0:x1]).permute(2, 0, 1)[None]
    crop = crop.contiguous(memory_format=torch.channels_last)
    out = F.interpolate(crop, size=(size, size), mode="bilinear", antialias=True)[0]
    if flip:
        out = out.flip(-1)
    return out.permute(1, 2, 0)


def jpeg_size(jpeg: bytes) -> tuple[int, int]:
    """(height, width) from the JPEG header (no decode)."""
    with Image.open(io.BytesIO(jpeg)) as img:
        return img.size[1], img.size[0]
