"""The PyTorch flavour's TFRecord input pipeline, without TensorFlow.

    shards of this global rank ─ index (record headers) ─ batch plan (a fresh permutation of
    the rank's records every pass; validation in file order, last batch partial, no padding)
      → DataLoader worker processes: read + CRC-check + parse records, crop windows, and
          decode="cpu": libjpeg-turbo decode, random-resized-crop + flip / center crop, uint8
          decode="gpu": nothing more; the JPEG bytes travel (smaller than pixels)
      → pinned memory → a prefetch thread with its own CUDA stream: non-blocking copy,
          (decode="gpu": nvJPEG batched decode, crop + resize + flip on the GPU), float,
          normalise, channels-last → at least two batches ready ahead of the training step.

Everything random is keyed by (seed, rank, batch number), never by worker or timing, so the
batches are the same with 0 or 16 worker processes, and a resumed run can start at any batch.
Augmentation follows the ImageNet recipe (torchvision's RandomResizedCrop: area 8-100 %, aspect
3/4-4/3 log-uniform, 100 attempts, then a center crop clamped to that aspect; flip 50 %),
the same spec as the TF flavours' pipeline.
"""

import collections
import contextlib
import io
import math
import multiprocessing
import os
import queue
import threading
import warnings
from dataclasses import dataclass, replace

import numpy as np
import simplejpeg
import torch
import torch.nn.functional as F
from PIL import Image

from training.data import shards
from training.data.reader import RecordRef, image_record, index_file, read_record
from training.errors import TrainingError

# ImageNet channel statistics of [0, 1] pixels (as training.tensorflow.pipeline)
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CENTER_CROP_PADDING = 32  # validation crops image_size / (image_size + 32) of the short side
RRC_AREA = (0.08, 1.0)  # random-resized-crop: share of the image's area
RRC_ASPECT = (3 / 4, 4 / 3)  # width / height, drawn log-uniformly
RRC_ATTEMPTS = 100
DECODES = ("auto", "cpu", "gpu")


# --- crop windows (top, left, height, width), vectorised over a batch ------------------------


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


# --- CPU decode -------------------------------------------------------------------------------


# libjpeg-turbo decodes at n/8 of the full size for n = 1..16, but only ½, ¼ and ⅛ are faster
# than a full decode (median ms per 100-130 kB JPEG, measured here: full 1.03, 7/8 1.75,
# 6/8 1.45, 5/8 1.30, 1/2 0.93): the other scales resample in the IDCT. The CPU path asks only
# for these factors; benchmarks/torch_input_pipeline.py measures the choice against any scale.
FAST_DCT_FACTORS = (8, 4, 2)
# Shard files a dataset keeps open at once, per process. A training batch's records come from a
# permutation of all the rank's records, so one batch of 256 can touch 256 shards: past the
# limit the least recently read is closed, and a reopen costs microseconds against the
# milliseconds of a JPEG decode, while 1,024 open shards would reach the usual per-process
# limit of 1,024 descriptors.
MAX_OPEN_SHARDS = 128


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


# --- the batches ------------------------------------------------------------------------------


@dataclass
class Split:
    """Every record of `files` in file order, as arrays: compact enough to hand to every
    worker process (ImageNet's 1.28 M records: 26 MB) where a list of objects is not."""

    files: list[str]
    file: np.ndarray  # int32: index into files
    offset: np.ndarray  # int64: where the record's data starts
    length: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.offset)

    def ref(self, position: int) -> RecordRef:
        return RecordRef(
            int(self.file[position]), int(self.offset[position]), int(self.length[position])
        )


def index_split(files: list[str]) -> Split:
    refs = [ref for number, path in enumerate(files) for ref in index_file(path, number)]
    return Split(
        files,
        np.array([r.file for r in refs], dtype=np.int32),
        np.array([r.offset for r in refs], dtype=np.int64),
        np.array([r.length for r in refs], dtype=np.int64),
    )


class RecordBatches(torch.utils.data.Dataset):
    """Batch number k → a dict of tensors, made in a DataLoader worker (or in this process).

    train=True: an endless stream; batch k holds stream positions kB … kB+B-1, position q
    being record perm_p[q mod n] with perm_p a permutation of this rank's n records drawn for
    pass p = q // n from (seed, rank, p). train=False: the records in file order, B at a time.
    """

    def __init__(
        self,
        split: Split,
        batch: int,
        image_size: int,
        num_classes: int,
        *,
        train: bool,
        seed: int,
        rank: int,
        decode: str,
        label_offset: int = 0,
    ):
        self.split, self.batch, self.size, self.num_classes = split, batch, image_size, num_classes
        self.train, self.seed, self.rank, self.decode = train, seed, rank, decode
        self.label_offset = label_offset
        self.dct_factors = FAST_DCT_FACTORS  # None: any n/8 scale (the benchmark's baseline)
        self._fds: collections.OrderedDict[int, int] = collections.OrderedDict()
        self._perm: tuple[int, np.ndarray] | None = None

    def __getstate__(self):  # file descriptors stay with the process that opened them
        return {**self.__dict__, "_fds": collections.OrderedDict(), "_perm": None}

    def __del__(self):
        for fd in getattr(self, "_fds", {}).values():
            os.close(fd)

    def __len__(self) -> int:
        """Validation batches (the last one partial); training batches are endless."""
        return math.ceil(len(self.split) / self.batch)

    def positions(self, k: int) -> np.ndarray:
        """Positions in the split of batch k's records."""
        n = len(self.split)
        if not self.train:
            return np.arange(k * self.batch, min((k + 1) * self.batch, n))
        q = np.arange(k * self.batch, (k + 1) * self.batch)
        out = np.empty(len(q), dtype=np.int64)
        for p in np.unique(q // n):
            if self._perm is None or self._perm[0] != p:
                rng = np.random.default_rng([self.seed, self.rank, int(p)])
                self._perm = (int(p), rng.permutation(n))
            at = q // n == p
            out[at] = self._perm[1][q[at] % n]
        return out

    def _fd(self, file: int) -> int:
        """An open descriptor of shard `file`: at most MAX_OPEN_SHARDS stay open per process,
        the least recently read closed first (a worker of a 1,024-shard rank would otherwise
        hold 1,024 descriptors, the usual per-process limit)."""
        if file in self._fds:
            self._fds.move_to_end(file)
            return self._fds[file]
        if len(self._fds) >= MAX_OPEN_SHARDS:
            os.close(self._fds.popitem(last=False)[1])
        self._fds[file] = os.open(self.split.files[file], os.O_RDONLY)
        return self._fds[file]

    def _record(self, position: int):
        ref = self.split.ref(position)
        path = self.split.files[ref.file]
        try:
            record = image_record(read_record(path, self._fd(ref.file), ref, position))
        except ValueError as exc:
            where = f"record {position} (data at byte {ref.offset})"
            raise TrainingError(
                f"unreadable record in TFRecord file {path!r}, {where}: {exc}"
            ) from None
        label = record.label - self.label_offset
        if not 0 <= label < self.num_classes:
            raise TrainingError(
                f"a label in the data is not a class index: label {record.label} of image "
                f"{record.filename!r} in {path!r} minus --label-offset {self.label_offset} is "
                f"{label} (--num-classes {self.num_classes}); labels minus --label-offset must be "
                "0..num_classes-1: raise --num-classes, or set --label-offset 1 for 1-based "
                "(TF-slim) shards"
            )
        return replace(record, label=label) if self.label_offset else record

    def __getitem__(self, k: int) -> dict:
        try:
            return self._make(k)
        except TrainingError as exc:  # travels back as data: the message, no worker traceback
            return {"error": str(exc)}

    def _make(self, k: int) -> dict:
        records = [self._record(int(p)) for p in self.positions(k)]
        dims = [
            (r.height, r.width) if r.height > 0 and r.width > 0 else jpeg_size(r.jpeg)
            for r in records
        ]
        heights, widths = zip(*dims, strict=True) if dims else ((), ())
        labels = torch.tensor([r.label for r in records], dtype=torch.int64)
        if self.train:
            rng = np.random.default_rng([self.seed, self.rank, k, 1])
            windows = random_windows(heights, widths, rng)
            flips = rng.random(len(records)) < 0.5
        else:
            windows = center_windows(heights, widths, self.size)
            flips = np.zeros(len(records), dtype=bool)
        if self.decode == "gpu":
            blobs = [np.frombuffer(r.jpeg, dtype=np.uint8) for r in records]
            return {
                "jpeg": torch.from_numpy(np.concatenate(blobs)),
                "lengths": torch.tensor([len(b) for b in blobs], dtype=torch.int64),
                "windows": torch.from_numpy(windows),
                "flips": torch.from_numpy(flips),
                "labels": labels,
            }
        images = torch.empty((len(records), self.size, self.size, 3), dtype=torch.uint8)
        for i, (record, window, flip, hw) in enumerate(
            zip(records, windows, flips, dims, strict=True)
        ):
            images[i] = decode_crop_resize(
                record.jpeg, window, hw, self.size, bool(flip), self.dct_factors
            )
        return {"images": images, "labels": labels}


# --- from worker output to a training batch on the device ------------------------------------


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
        windows = item["windows"].to(self.device, non_blocking=True)
        flips = item["flips"].to(self.device, non_blocking=True)
        return crop_resize_flip(decoded, windows, flips, self.size)


# Bytes of float pixels one crop_resize_flip pass may hold: larger batches go in chunks.
RESIZE_CHUNK_BYTES = 1 << 30


def _resize_weights(start, length, size: int, extent: int, device) -> torch.Tensor:
    """[N, size, extent] weights of PyTorch's antialiased bilinear resize (PIL's triangle filter,
    aten/src/ATen/native/UpSample.h `_upsample_bilinear2d_aa`) of each image's window
    [start, start + length) to `size` pixels, zero outside the window."""
    scale = (length.float() / size)[:, None, None]
    support = scale.clamp(min=1.0)
    center = (
        start.float()[:, None, None]
        + (torch.arange(size, device=device)[None, :, None] + 0.5) * scale
    )
    x = torch.arange(extent, device=device)[None, None, :]
    weights = (1 - ((x + 0.5 - center) / support).abs()).clamp(min=0)
    inside = (x >= start[:, None, None]) & (x < (start + length)[:, None, None])
    weights = weights * inside
    return weights / weights.sum(-1, keepdim=True)


def crop_resize_flip(
    images: list[torch.Tensor], windows: torch.Tensor, flips: torch.Tensor, size: int
) -> torch.Tensor:
    """CHW uint8 images of any sizes → [N, 3, size, size] float32: each image's window (top,
    left, height, width) resized with antialiased bilinear weights, mirrored where `flips`.

    Batched, with no per-image kernels: the images are padded into one tensor (a nested tensor's
    `to_padded_tensor`), and the resize is two batched matrix products with per-image weight
    matrices (a flip reverses the column weights), so a batch costs a handful of launches
    whatever its size, instead of a crop, resize, flip and copy per image."""
    out = []
    heights = max(image.shape[1] for image in images)
    widths = max(image.shape[2] for image in images)
    per_image = 3 * heights * widths * 4
    step = max(1, RESIZE_CHUNK_BYTES // per_image)
    for first in range(0, len(images), step):  # one pass unless the batch is very large
        chunk = images[first : first + step]
        with warnings.catch_warnings():
            # Only the notice that the strided nested-tensor API is a prototype (the jagged
            # layout it recommends has one ragged dimension; images have two).
            warnings.filterwarnings("ignore", "The PyTorch API of nested tensors", UserWarning)
            nested = torch.nested.nested_tensor(chunk)
        padded = nested.to_padded_tensor(0, (len(chunk), 3, heights, widths))
        top, left, height, width = windows[first : first + step].unbind(1)
        rows = _resize_weights(top, height, size, heights, padded.device)
        columns = _resize_weights(left, width, size, widths, padded.device)
        mirror = flips[first : first + step][:, None, None]
        columns = torch.where(mirror, columns.flip(1), columns)
        out.append(rows[:, None] @ padded.float() @ columns.transpose(1, 2)[:, None])
    return torch.cat(out) if len(out) > 1 else out[0]


_END = object()


def prefetched(items, finish, device: torch.device, depth: int):
    """`finish(item)` for each item, `depth` batches ahead on a thread of their own (its own
    CUDA stream on a GPU, so copies and decode overlap the training step); depth 0: inline."""
    if depth == 0:
        for item in items:
            yield finish(item)
        return
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def put(value) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(value, timeout=0.1)
                return True
        return False

    def work():
        try:
            with torch.cuda.stream(stream) if stream else contextlib.nullcontext():
                for item in items:
                    batch = finish(item)
                    event = None
                    if stream is not None:
                        event = torch.cuda.Event()
                        event.record(stream)
                    if not put((batch, event)):
                        return
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)
            return
        put(_END)

    thread = threading.Thread(target=work, name="batch-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            got = ready.get()
            if got is _END:
                return
            if isinstance(got, BaseException):
                raise got
            batch, event = got
            if event is not None:
                current = torch.cuda.current_stream(device)
                current.wait_event(event)
                for tensor in batch:
                    tensor.record_stream(current)
            yield batch
    finally:
        stop.set()


def worker_context():
    """Start worker processes with 'forkserver', as Horovod's PyTorch ImageNet example does:
    fork is unsafe with InfiniBand (verbs) stacks (horovod/horovod
    examples/pytorch/pytorch_imagenet_resnet50.py)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["training.torch.data"])
        return context
    return None


def batches(dataset: RecordBatches, sampler, *, workers: int, prefetch: int, finish: Finisher):
    """The batches `sampler` names, made by `workers` processes (0: in this one) and
    finished `prefetch` batches ahead (0: inline)."""
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=None,  # the dataset makes whole batches
        sampler=sampler,
        num_workers=workers,
        pin_memory=finish.device.type == "cuda",
        prefetch_factor=2 if workers else None,
        multiprocessing_context=worker_context() if workers else None,
    )
    yield from prefetched(iter(loader), finish, finish.device, prefetch)


# --- what training.torch.train uses ---------------------------------------------------------------


def resolve_decode(decode: str, device: torch.device) -> str:
    if decode == "auto":
        decode = "gpu" if device.type == "cuda" else "cpu"
    if decode == "gpu":
        if device.type != "cuda":
            raise TrainingError("--decode gpu needs a GPU; this worker has none (use cpu)")
        try:
            import torchvision.io  # noqa: F401
        except ImportError:
            raise TrainingError("--decode gpu needs torchvision (nvJPEG decode)") from None
    return decode


class TFRecordData:
    """This rank's training stream and validation passes from the shards in `args.data_dir`."""

    def __init__(
        self,
        args,
        rank: int,
        size: int,
        device: torch.device,
        workers: int,
        prefetch: int = 2,
        gather=None,
    ):
        """`gather`: horovod.torch's allgather_object, so that shards without a manifest are
        counted once per job (training.data.record_count); None: this process counts them all."""
        self.args, self.rank, self.workers, self.prefetch = args, rank, workers, prefetch
        all_train = shards.list_shards(args.data_dir, "train")
        train_files = shards.shards_for_rank(all_train, rank, size)
        all_val = shards.validation_shards(args.data_dir, bool(args.val_steps))
        self.decode = resolve_decode(getattr(args, "decode", "auto"), device)
        self.finish = Finisher(device, args.image_size, args.channels_last)
        self.train_split = index_split(train_files)
        if not len(self.train_split):
            raise TrainingError(f"this worker's train shards hold no records: {train_files}")
        # Validation on every worker alike (its accuracy is pooled), or on none.
        has_validation = bool(all_val) and args.val_steps != 0
        self.val_split = index_split(all_val[rank::size]) if has_validation else None
        self.steps_per_epoch = args.steps_per_epoch or _steps(
            args, all_train, rank, size, gather, workers
        )

    def _dataset(self, split: Split, train: bool) -> RecordBatches:
        a = self.args
        return RecordBatches(
            split,
            a.batch_size,
            a.image_size,
            a.num_classes,
            train=train,
            seed=a.seed,
            rank=self.rank,
            decode=self.decode,
            label_offset=a.label_offset,
        )

    def train_batches(self, first: int = 0):
        """Micro-batches first, first + 1, … forever."""
        dataset = self._dataset(self.train_split, True)
        return batches(
            dataset, _Count(first), workers=self.workers, prefetch=self.prefetch, finish=self.finish
        )

    def validation_batches(self):
        """A pass over this rank's validation records (None: no validation split)."""
        if self.val_split is None:
            return None
        dataset = self._dataset(self.val_split, False)
        count = len(dataset) if len(self.val_split) else 0
        if self.args.val_steps:
            count = min(count, self.args.val_steps)
        return batches(
            dataset,
            range(count),
            workers=min(self.workers, count),
            prefetch=self.prefetch,
            finish=self.finish,
        )


class _Count:
    """An endless sampler: first, first + 1, …"""

    def __init__(self, first: int):
        self.first = first

    def __iter__(self):
        k = self.first
        while True:
            yield k
            k += 1


def _steps(args, all_train: list[str], rank: int, size: int, gather, threads: int) -> int:
    """Optimizer steps per epoch: the examples from the data manifest when there is one, else
    counted from the record headers, each worker its own shards, shared with `gather`."""
    from training import schedule
    from training.data import record_count

    examples = record_count.count_examples(args.data_dir, all_train, rank, size, gather, threads)
    return schedule.steps_per_epoch(examples, args.batch_size, size, args.grad_accum)
