"""The records of a rank's shards as batches, made in DataLoader worker processes: batch
number k → a dict of tensors (decoded images, or the JPEG bytes for the GPU to decode)."""

import collections
import math
import os
from dataclasses import dataclass, replace

import numpy as np
import torch

from training.data.records import image_record
from training.data.tfrecord import RecordRef, index_file, read_record
from training.errors import TrainingError
from training.torch.crops import center_windows, random_windows
from training.torch.jpeg_decode import FAST_DCT_FACTORS, decode_crop_resize, jpeg_size

# Shard files a dataset keeps open at once, per process. A training batch's records come from a
# permutation of all the rank's records, so one batch of 256 can touch 256 shards: past the
# limit the least recently read is closed, and a reopen costs microseconds against the
# milliseconds of a JPEG decode, while 1,024 open shards would reach the usual per-process
# limit of 1,024 descriptors.
MAX_OPEN_SHARDS = 128


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
