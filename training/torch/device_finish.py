"""A worker's batch finished on the device: copied (uint8), decoded by nvJPEG and cropped,
resized and flipped on the GPU for `--decode gpu`, converted to float and normalised."""

import warnings

import torch

from training.errors import TrainingError

# ImageNet channel statistics of [0, 1] pixels (as training.tensorflow.pipeline)
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class Finisher:
    """A worker's batch → (NCHW float images, normalised, on `device`; labels on `device`)."""

    def __init__(self, device: torch.device, image_size: int, channels_last: bool):
        self.device, self.size, self.channels_last = device, image_size, channels_last
        # (pixel / 255 - mean) / std = pixel * scale + bias
        self.scale = 1 / (255 * torch.tensor(STD, device=device).view(1, 3, 1, 1))
        self.bias = -torch.tensor(MEAN, device=device).view(1, 3, 1, 1) / torch.tensor(
            STD, device=device
        ).view(1, 3, 1, 1)
        self.layout = torch.channels_last if channels_last else torch.contiguous_format

    def __call__(self, item: dict) -> tuple[torch.Tensor, torch.Tensor]:
        if "error" in item:
            raise TrainingError(item["error"])
        labels = item["labels"].to(self.device, non_blocking=True)
        if "jpeg" in item:
            pixels = self.gpu_decode(item)
        else:  # NHWC uint8 → an NCHW view with channels-last strides; uint8 crosses the bus
            pixels = item["images"].to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        # One pass converts to float in the model's layout, one scales in place.
        images = torch.empty(pixels.shape, device=self.device, memory_format=self.layout)
        images.copy_(pixels)
        return images.mul_(self.scale).add_(self.bias), labels

    def gpu_decode(self, item: dict) -> torch.Tensor:
        """nvJPEG batched decode (torchvision ≥ 0.19 takes a list), then crop, resize and flip
        the whole batch at once (`crop_resize_flip`); float32 NCHW in [0, 255]."""
        from torchvision.io import ImageReadMode, decode_jpeg

        chunks = list(torch.split(item["jpeg"], item["lengths"].tolist()))  # host tensors
        decoded = decode_jpeg(chunks, mode=ImageReadMode.RGB, device=self.device)
        flips = item["flips"].to(self.device, non_blocking=True)
        return crop_resize_flip(decoded, item["windows"], flips, self.size)


# Bytes of float pixels one crop_resize_flip pass may hold: larger batches go in chunks.
RESIZE_CHUNK_BYTES = 1 << 30


def _resize_weights(length: torch.Tensor, size: int, extent: int) -> torch.Tensor:
    """[N, size, extent] weights of PyTorch's antialiased bilinear resize (PIL's triangle filter,
    aten/src/ATen/native/UpSample.h `_upsample_bilinear2d_aa`) of each window's first `length`
    pixels to `size` pixels, zero over the padding beyond them."""
    device = length.device
    scale = (length.float() / size)[:, None, None]
    support = scale.clamp(min=1.0)
    center = (torch.arange(size, device=device)[None, :, None] + 0.5) * scale
    x = torch.arange(extent, device=device)[None, None, :]
    weights = (1 - ((x + 0.5 - center) / support).abs()).clamp(min=0)
    weights = weights * (x < length[:, None, None])
    return weights / weights.sum(-1, keepdim=True)


def padded_windows(images: list[torch.Tensor], windows: list[list[int]]) -> torch.Tensor:
    """Each image's window (top, left, height, width) cut out (a view), the windows padded with
    zeros into one uint8 tensor [N, 3, tallest window, widest window] (a nested tensor's
    `to_padded_tensor`): the padding follows the crops, not the largest image in the batch."""
    cut = [
        image[:, top : top + h, left : left + w]
        for image, (top, left, h, w) in zip(images, windows, strict=True)
    ]
    heights = max(h for _, _, h, _ in windows)
    widths = max(w for _, _, _, w in windows)
    with warnings.catch_warnings():
        # Only the notice that the strided nested-tensor API is a prototype (the jagged layout
        # it recommends has one ragged dimension; images have two).
        warnings.filterwarnings("ignore", "The PyTorch API of nested tensors", UserWarning)
        nested = torch.nested.nested_tensor(cut)
    return nested.to_padded_tensor(0, (len(cut), 3, heights, widths))


def crop_resize_flip(
    images: list[torch.Tensor], windows: torch.Tensor, flips: torch.Tensor, size: int
) -> torch.Tensor:
    """CHW uint8 images of any sizes → [N, 3, size, size] float32: each image's window (top,
    left, height, width; a host tensor, so cutting needs no device sync) resized with
    antialiased bilinear weights, mirrored where `flips`.

    Batched, with no per-image resize kernels: the windows are cut and padded into one tensor
    (`padded_windows`), and the resize is two batched matrix products with per-window weight
    matrices (a flip reverses the column weights), so a batch costs a handful of launches
    whatever its size, instead of a crop, resize, flip and copy per image."""
    out = []
    cuts = windows.tolist()
    padded_pixels = max(h for _, _, h, _ in cuts) * max(w for _, _, _, w in cuts)
    step = max(1, RESIZE_CHUNK_BYTES // (3 * padded_pixels * 4))
    for first in range(0, len(images), step):  # one pass unless the batch is very large
        padded = padded_windows(images[first : first + step], cuts[first : first + step])
        lengths = windows[first : first + step, 2:].to(padded.device, non_blocking=True)
        height, width = lengths.unbind(1)
        rows = _resize_weights(height, size, padded.shape[2])
        columns = _resize_weights(width, size, padded.shape[3])
        mirror = flips[first : first + step][:, None, None]
        columns = torch.where(mirror, columns.flip(1), columns)
        out.append(rows[:, None] @ padded.float() @ columns.transpose(1, 2)[:, None])
    return torch.cat(out) if len(out) > 1 else out[0]
