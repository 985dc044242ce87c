"""Crop windows (top, left, height, width) for a batch at once: random-resized-crop for
training, a centred square for validation (the ImageNet recipe, as the TF flavours crop)."""

import numpy as np

CENTER_CROP_PADDING = 32  # validation crops image_size / (image_size + 32) of the short side
RRC_AREA = (0.08, 1.0)  # random-resized-crop: share of the image's area
RRC_ASPECT = (3 / 4, 4 / 3)  # width / height, drawn log-uniformly
RRC_ATTEMPTS = 100


def random_windows(heights, widths, rng: np.random.Generator) -> np.ndarray:
    """Random-resized-crop windows: torchvision's RandomResizedCrop.get_params (pytorch/vision
    torchvision/transforms/transforms.py), for a batch at once with RRC_ATTEMPTS tries each."""
    h = np.asarray(heights, dtype=np.float64)[:, None]
    w = np.asarray(widths, dtype=np.float64)[:, None]
    n = len(h)
    area = h * w * rng.uniform(*RRC_AREA, size=(n, RRC_ATTEMPTS))
    aspect = np.exp(rng.uniform(*np.log(RRC_ASPECT), size=(n, RRC_ATTEMPTS)))
    cw = np.rint(np.sqrt(area * aspect))
    ch = np.rint(np.sqrt(area / aspect))
    fits = (cw > 0) & (ch > 0) & (cw <= w) & (ch <= h)
    first = fits.argmax(axis=1)
    rows = np.arange(n)
    cw, ch = cw[rows, first], ch[rows, first]
    offsets = rng.random((n, 2))  # drawn for every image, so the stream does not depend on fits
    windows = np.empty((n, 4), dtype=np.int64)
    h, w = h[:, 0], w[:, 0]
    windows[:, 0] = np.floor(offsets[:, 0] * (h - ch + 1))
    windows[:, 1] = np.floor(offsets[:, 1] * (w - cw + 1))
    windows[:, 2], windows[:, 3] = ch, cw
    for i in np.flatnonzero(~fits.any(axis=1)):  # fallback: a center crop, aspect clamped
        windows[i] = _center_fallback(int(h[i]), int(w[i]))
    return windows


def _center_fallback(h: int, w: int) -> tuple[int, int, int, int]:
    ratio = w / h
    if ratio < RRC_ASPECT[0]:
        cw, ch = w, round(w / RRC_ASPECT[0])
    elif ratio > RRC_ASPECT[1]:
        ch, cw = h, round(h * RRC_ASPECT[1])
    else:
        ch, cw = h, w
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def center_windows(heights, widths, image_size: int) -> np.ndarray:
    """Validation: a centred square of image_size / (image_size + 32) of the short side (the
    rounding of training.tensorflow.pipeline's validation crop)."""
    h = np.asarray(heights, dtype=np.int64)
    w = np.asarray(widths, dtype=np.int64)
    side = (image_size / (image_size + CENTER_CROP_PADDING) * np.minimum(h, w)).astype(np.int64)
    side = np.maximum(side, 1)
    return np.stack([(h - side + 1) // 2, (w - side + 1) // 2, side, side], axis=1)
