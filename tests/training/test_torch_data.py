"""The PyTorch flavour's TFRecord reader and input pipeline, against TensorFlow's own reading of
the shards `azdl data prepare` writes (TensorFlow is the truth here; the reader never imports it).
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf  # the training environment has both: a broken install must fail, not skip
import torch

from training.data import records
from training.data.example_codec import decode_example
from training.data.records import image_record
from training.data.shards import list_shards
from training.data.tfrecord import RecordWriter, read_file
from training.errors import TrainingError
from training.options import parse_args
from training.tensorflow import pipeline
from training.torch import crops, device_finish, jpeg_decode, loader, record_batches

SIZE = 48


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A sample set converted by the data tool: 3 train shards, 2 validation shards (its shard
    writer runs in this process rather than in a spawned pool, to save TensorFlow's start-up)."""
    from training.data.prepare import convert
    from training.data.prepare.sample import generate

    root = tmp_path_factory.mktemp("prepared")
    generate(root / "jpeg", classes=3, train_per_class=6, validation_per_class=3, size=72)
    with pytest.MonkeyPatch.context() as patch:
        in_process = lambda tasks, *_: list(map(convert.write_shard, tasks))  # noqa: E731
        patch.setattr(convert, "_run_tasks", in_process)
        convert.convert(
            root / "jpeg", root / "tfr", ["train", "validation"], {"train": 3, "validation": 2}
        )
    return root / "tfr"


def _args(data_dir, *extra):
    return parse_args(
        "torch",
        [
            "--data-dir",
            str(data_dir),
            "--image-size",
            str(SIZE),
            "--num-classes",
            "3",
            "--batch-size",
            "4",
            *map(str, extra),
        ],
    )


def test_records_are_tensorflows_records_byte_for_byte(prepared):
    for split in ("train", "validation"):
        for path in list_shards(prepared, split):
            ours = list(read_file(path))
            theirs = [r.numpy() for r in tf.data.TFRecordDataset(path)]
            assert ours == theirs and ours, path


def test_examples_parse_as_tensorflow_parses_them(prepared):
    for path in list_shards(prepared, "train"):
        for blob in read_file(path):
            ours, theirs = image_record(blob), pipeline.parse_example(tf.constant(blob))
            assert ours.jpeg == theirs["image/encoded"].numpy()
            assert ours.label == int(theirs["image/class/label"])
            assert (ours.height, ours.width) == (
                int(theirs["image/height"]),
                int(theirs["image/width"]),
            )
            assert ours.filename == theirs["image/filename"].numpy().decode()


def test_every_feature_kind_decodes_like_protobuf():
    """Packed and unpacked lists, negatives, floats, empty features, as protobuf writes them."""
    feature = tf.train.Feature
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "ints": feature(int64_list=tf.train.Int64List(value=[0, -1, 2**62, -(2**63)])),
                "floats": feature(float_list=tf.train.FloatList(value=[1.5, -0.25])),
                "bytes": feature(bytes_list=tf.train.BytesList(value=[b"a", b"", b"\xff" * 300])),
                "empty": feature(),
            }
        )
    )
    parsed = decode_example(example.SerializeToString())
    assert parsed == {
        "ints": [0, -1, 2**62, -(2**63)],
        "floats": [1.5, -0.25],
        "bytes": [b"a", b"", b"\xff" * 300],
        "empty": [],
    }


def test_validation_batches_match_tf_data_in_order_without_padding(prepared):
    """Same records, labels and order as training.tensorflow.pipeline's validation dataset; the
    last batch is partial; pixels agree up to the two libraries' resampling."""
    for rank, size in ((0, 1), (1, 2)):
        args = _args(prepared)
        ours = list(
            loader.TFRecordData(
                args, rank, size, torch.device("cpu"), workers=0
            ).validation_batches()
        )
        theirs = list(pipeline.make_data(args, rank, size, 1).validation.as_numpy_iterator())
        assert [len(y) for _, y in ours] == [len(y) for _, y in theirs]
        for (x, y), (tx, ty) in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(y.numpy(), ty)
            nhwc = x.permute(0, 2, 3, 1).numpy()
            assert nhwc.shape == tx.shape
            assert np.abs(nhwc - tx).mean() < 0.1  # normalised units (1/255 ≈ 0.017)
    # 9 validation images in 2 shards (5 + 4): rank 0 of 1 sees 4 + 4 + 1.
    args = _args(prepared)
    labels = [
        len(y)
        for _, y in loader.TFRecordData(
            args, 0, 1, torch.device("cpu"), workers=0
        ).validation_batches()
    ]
    assert labels == [4, 4, 1]


def _filenames(split: record_batches.Split, positions) -> list[str]:
    out = []
    for p in positions:
        ref = split.ref(int(p))
        with open(split.files[ref.file], "rb") as f:
            f.seek(ref.offset)
            out.append(image_record(f.read(ref.length)).filename)
    return out


def test_training_passes_cover_the_ranks_records_reshuffled_each_pass(prepared):
    args = _args(prepared)
    data = loader.TFRecordData(args, 1, 2, torch.device("cpu"), workers=0)
    dataset = data._dataset(data.train_split, True)
    n = len(data.train_split)
    # The rank's shards by global rank (1 of 2: the second shard), read by tf.data.
    expected = [
        pipeline.parse_example(r)["image/filename"].numpy().decode()
        for r in tf.data.TFRecordDataset(list_shards(prepared, "train")[1::2])
    ]
    stream = np.concatenate([dataset.positions(k) for k in range(3 * n // 4 + 1)])
    passes = [stream[i * n : (i + 1) * n] for i in range(3)]
    for positions in passes:
        assert sorted(_filenames(data.train_split, positions)) == sorted(expected)
    assert not np.array_equal(passes[0], passes[1])  # a fresh order every pass
    again = data._dataset(data.train_split, True)
    assert np.array_equal(again.positions(2), dataset.positions(2))  # fixed by the seed
    other = loader.TFRecordData(_args(prepared, "--seed", 1), 1, 2, torch.device("cpu"), 0)
    assert not np.array_equal(
        other._dataset(other.train_split, True).positions(0), dataset.positions(0)
    )


def test_worker_processes_and_prefetching_yield_the_simple_paths_batches(prepared):
    args = _args(prepared, "--channels-last")
    simple = loader.TFRecordData(args, 0, 1, torch.device("cpu"), workers=0, prefetch=0)
    fast = loader.TFRecordData(args, 0, 1, torch.device("cpu"), workers=2, prefetch=2)
    a, b = simple.train_batches(5), fast.train_batches(5)
    for _ in range(6):  # across a pass boundary (18 records, batches of 4)
        (x, y), (fx, fy) = next(a), next(b)
        assert torch.equal(x, fx) and torch.equal(y, fy)
        assert fx.is_contiguous(memory_format=torch.channels_last)
        assert fx.dtype == torch.float32 and fx.shape == (4, 3, SIZE, SIZE)
    val = [y for _, y in fast.validation_batches()]
    assert torch.equal(torch.cat(val), torch.cat([y for _, y in simple.validation_batches()]))


def test_closing_the_prefetched_stream_stops_and_joins_its_thread():
    """A stream abandoned mid-pass (the benchmark's and the training loop's end) leaves no
    thread behind: one still inside torch at interpreter exit aborted a run (exit 134)."""
    import threading
    import time

    def endless():
        while True:
            yield torch.zeros(2)

    def slow_finish(item):
        time.sleep(0.05)  # the thread is busy in `finish` when the stream is closed
        return item

    before = set(threading.enumerate())
    stream = loader.prefetched(endless(), slow_finish, torch.device("cpu"), depth=2)
    assert torch.equal(next(stream), torch.zeros(2))
    started = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in started] == ["batch-prefetch"]
    stream.close()
    assert not started[0].is_alive()


def test_random_resized_crop_follows_the_recipe():
    rng = np.random.default_rng(0)
    h, w = np.full(4000, 375), np.full(4000, 500)
    windows = crops.random_windows(h, w, rng)
    top, left, ch, cw = windows.T
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + ch <= h).all() and (left + cw <= w).all()
    share = ch * cw / (h * w)
    assert share.min() > 0.07 and share.max() <= 1.0 and np.median(share) > 0.4
    aspect = cw / ch
    assert aspect.min() > 0.70 and aspect.max() < 1.40
    # No window fits a 1 × 1000 strip: the center fallback, clamped to aspect 4/3.
    assert tuple(crops.random_windows([1], [1000], rng)[0]) == (0, 499, 1, 1)


def test_a_corrupted_record_is_named_with_its_file(prepared, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    for path in map(Path, list_shards(prepared, "train")):
        (bad / path.name).write_bytes(path.read_bytes())
    shard = bad / "train-00001-of-00003"
    blob = bytearray(shard.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # inside a JPEG: only the data checksum can tell
    shard.write_bytes(bytes(blob))
    data = loader.TFRecordData(_args(bad), 0, 1, torch.device("cpu"), workers=1)
    batches = data.train_batches()
    with pytest.raises(
        TrainingError,
        match=rf"corrupt TFRecord file '{shard}': record \d+ "
        r"at byte \d+: data checksum mismatch",
    ):
        for _ in range(5):
            next(batches)
    blob[3] ^= 0x01  # the first record's length: the index finds it before training starts
    shard.write_bytes(bytes(blob))
    with pytest.raises(TrainingError, match=rf"'{shard}': record 0 at byte 0: length checksum"):
        loader.TFRecordData(_args(bad), 0, 1, torch.device("cpu"), workers=0)


def test_labels_beyond_num_classes_name_the_image(prepared):
    args = _args(prepared, "--num-classes", "2")
    batches = loader.TFRecordData(args, 0, 1, torch.device("cpu"), workers=0).train_batches()
    with pytest.raises(TrainingError, match=r"label 2 of image '.+' in '.+train-0000\d-of-00003'"):
        for _ in range(5):
            next(batches)


def test_label_offset_shifts_every_label_and_names_those_below_it(prepared):
    """--label-offset (TF-slim's 1-based shards) as training.tensorflow.pipeline applies it: the
    record's label minus the offset, and a record whose label falls below the offset is named."""
    split = record_batches.index_split(list_shards(prepared, "validation"))
    common = dict(train=False, seed=0, rank=0, decode="cpu")
    plain = record_batches.RecordBatches(split, 4, SIZE, 3, **common)
    shifted = record_batches.RecordBatches(split, 4, SIZE, 3, **common, label_offset=1)
    seen = set()
    for position in range(len(split)):
        label = plain._record(position).label
        seen.add(label)
        if label >= 1:
            assert shifted._record(position).label == label - 1
        else:
            with pytest.raises(
                TrainingError, match=r"label 0 of image .+ minus --label-offset 1 is -1"
            ):
                shifted._record(position)
    assert seen == {0, 1, 2}


def test_shards_without_a_manifest_are_counted_once_per_job_from_their_headers(
    tmp_path, monkeypatch
):
    """TF-slim shards have no manifest: the torch flavour counts records from their headers, each
    worker only its own train shards, and shares the counts (training.data.record_count), so no
    worker reads another's shards to count them."""
    from worker_runs import write_tiny_tfrecords

    from training import schedule
    from training.data import record_count

    root = write_tiny_tfrecords(tmp_path, train_shards=4, validation_shards=0, per_shard=5)
    files = list_shards(root, "train")
    import tensorflow as tf

    tf_counts = [sum(1 for _ in tf.data.TFRecordDataset(f)) for f in files]  # tf.data's count
    assert [record_count.count_records(f) for f in files] == tf_counts == [5] * 4

    counted = []
    monkeypatch.setattr(record_count, "_COUNTS", {})  # this process has counted nothing yet
    monkeypatch.setattr(record_count, "count_records", lambda path: counted.append(path) or 5)
    theirs = {f: 5 for f in files[1::2]}  # what rank 1 counted, as allgather_object hands it
    data = loader.TFRecordData(
        _args(root), 0, 2, torch.device("cpu"), workers=0, gather=lambda mine: [mine, theirs]
    )
    assert counted == files[0::2]
    assert data.steps_per_epoch == schedule.steps_per_epoch(20, 4, 2, 1)


@pytest.mark.parametrize("mode", ["L", "CMYK", "RGB"])
def test_grey_and_cmyk_jpegs_decode_to_rgb(mode):
    """libjpeg-turbo's fast path refuses CMYK: Pillow decodes those."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (90, 60), 200 if mode == "L" else (10, 200, 30, 0)[: len(mode)]).save(
        buffer, "JPEG"
    )
    out = jpeg_decode.decode_crop_resize(buffer.getvalue(), (5, 10, 50, 70), (60, 90), 32, True)
    assert out.shape == (32, 32, 3) and out.dtype == torch.uint8
    if mode == "L":
        assert (out == out[..., :1]).all()  # grey stays grey in all three channels


def test_the_gpu_decode_path_matches_the_cpu_path(prepared, monkeypatch):
    """--decode gpu's plumbing (JPEG bytes, lengths, windows and flips from the workers; crop,
    resize, flip and normalisation after a batched decode) on the CPU: torchvision's
    decode_jpeg, which needs CUDA here, is replaced by Pillow returning what it returns (a list
    of CHW uint8 tensors). Same windows, so the batches agree up to the decoders' rounding
    (measured: 0.016 in normalised units; a lost flip alone gives 0.45)."""
    import io
    import types

    from PIL import Image

    calls = []

    def decode_jpeg(inputs, mode, device):
        calls.append((len(inputs), mode, device))
        return [
            torch.from_numpy(np.array(Image.open(io.BytesIO(t.numpy().tobytes())).convert("RGB")))
            .permute(2, 0, 1)
            .to(device)
            for t in inputs
        ]

    fake = types.ModuleType("torchvision.io")
    fake.decode_jpeg, fake.ImageReadMode = decode_jpeg, types.SimpleNamespace(RGB="RGB")
    monkeypatch.setitem(sys.modules, "torchvision", types.ModuleType("torchvision"))
    monkeypatch.setitem(sys.modules, "torchvision.io", fake)
    args = _args(prepared, "--channels-last")
    data = loader.TFRecordData(args, 0, 1, torch.device("cpu"), workers=0, prefetch=0)
    finish = device_finish.Finisher(torch.device("cpu"), SIZE, channels_last=True)
    for train in (True, False):
        cpu, gpu = (
            record_batches.RecordBatches(
                data.train_split if train else data.val_split,
                4,
                SIZE,
                3,
                train=train,
                seed=0,
                rank=0,
                decode=d,
            )
            for d in ("cpu", "gpu")
        )
        for k in range(2):
            item = gpu[k]
            assert item["jpeg"].dtype == torch.uint8
            assert int(item["lengths"].sum()) == len(item["jpeg"])
            (x, y), (gx, gy) = finish(cpu[k]), finish(item)
            assert torch.equal(y, gy) and gx.shape == x.shape
            assert gx.is_contiguous(memory_format=torch.channels_last)
            assert (gx - x).abs().mean() < 0.05  # normalised units
    assert calls and calls[0] == (4, "RGB", torch.device("cpu"))


def _jpeg(height: int, width: int, seed: int = 0) -> bytes:
    import io

    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def test_cpu_decode_asks_libjpeg_only_for_the_scales_faster_than_full_size(monkeypatch):
    """Every decode is full size or ½, ¼, ⅛ (libjpeg rounds a scaled side up), never the
    5/8-7/8 scales that decode slower than full size; and never smaller than the crop needs."""
    import simplejpeg

    jpeg, full = _jpeg(900, 1200), (900, 1200)  # large enough for ½ and ¼ scales
    shapes, real = [], simplejpeg.decode_jpeg

    def recording(*args, **kwargs):
        out = real(*args, **kwargs)
        shapes.append(out.shape[:2])
        return out

    monkeypatch.setattr(jpeg_decode.simplejpeg, "decode_jpeg", recording)
    fast = {(-(-900 // f), -(-1200 // f)) for f in (1, 2, 4, 8)}
    rng = np.random.default_rng(0)
    for window in crops.random_windows([900] * 200, [1200] * 200, rng):
        _, _, height, width = window
        jpeg_decode.decode_crop_resize(jpeg, window, full, 224, False)
        decoded = shapes[-1]
        assert decoded in fast, decoded
        enough = decoded[0] * height >= 224 * 900 and decoded[1] * width >= 224 * 1200
        assert decoded == full or enough, (decoded, window)  # a small crop: full size is all
    assert {s for s in shapes} - {full}, "some crops should decode at a reduced scale"
    # The old way (any n/8 scale) picks the slow scales for some of the same windows.
    shapes.clear()
    for window in crops.random_windows([900] * 200, [1200] * 200, np.random.default_rng(0)):
        jpeg_decode.decode_crop_resize(jpeg, window, full, 224, False, factors=None)
    assert set(shapes) - fast, "the baseline should use scales like 5/8"


def test_open_shards_stay_bounded_at_imagenet_scale(tmp_path):
    """1,024 shards of two records each, read by one dataset under a 1,024-descriptor limit
    (the usual default): the open descriptors never exceed MAX_OPEN_SHARDS more than before."""
    import resource

    jpeg = _jpeg(40, 40)
    for i in range(1024):
        with RecordWriter(str(tmp_path / f"train-{i:05d}-of-01024")) as writer:
            for j in range(2):
                writer.write(records.serialize_example(jpeg, (i + j) % 3, 40, 40, f"{i}-{j}.jpg"))
    split = record_batches.index_split(list_shards(tmp_path, "train"))
    dataset = record_batches.RecordBatches(
        split, 256, 16, 3, train=True, seed=0, rank=0, decode="cpu"
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        before = len(os.listdir("/proc/self/fd"))
        most = before
        for k in range(12):  # 3,072 records: every shard read, most of them more than once
            assert dataset[k]["images"].shape == (256, 16, 16, 3)
            most = max(most, len(os.listdir("/proc/self/fd")))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert most - before <= record_batches.MAX_OPEN_SHARDS
    assert len(dataset._fds) == record_batches.MAX_OPEN_SHARDS


@pytest.mark.parametrize("size", [32, 150])  # down- and upscaling
def test_the_batched_gpu_augmentation_is_pytorchs_antialiased_resize_per_image(size, monkeypatch):
    """crop_resize_flip (one padded batch, two batched matrix products) against PyTorch's own
    kernel image by image: F.interpolate(bilinear, antialias=True) of the crop, then the flip.
    Also in chunks (a tiny RESIZE_CHUNK_BYTES), which must change nothing."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    sizes = [(60, 90), (48, 48), (120, 70), (33, 200), (75, 75)]
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in sizes]
    heights, widths = zip(*sizes, strict=True)
    windows = torch.from_numpy(crops.random_windows(heights, widths, np.random.default_rng(1)))
    flips = torch.tensor([True, False, True, False, True])
    out = device_finish.crop_resize_flip(images, windows, flips, size)
    for image, (top, left, h, w), flip, got in zip(
        images, windows.tolist(), flips, out, strict=True
    ):
        crop = image[None, :, top : top + h, left : left + w].float()
        want = F.interpolate(crop, size=(size, size), mode="bilinear", antialias=True)[0]
        want = want.flip(-1) if flip else want
        assert (got - want).abs().max() < 2e-3  # of 255
    monkeypatch.setattr(device_finish, "RESIZE_CHUNK_BYTES", 1)
    assert torch.equal(device_finish.crop_resize_flip(images, windows, flips, size), out)


def test_the_gpu_augmentation_pads_the_crop_windows_not_the_whole_images(monkeypatch):
    """What the batched resize multiplies is padded to the largest crop window in the batch,
    never to the largest image (issue 28: ImageNet images reach 3,000 px, their crops far less)."""
    g = torch.Generator().manual_seed(0)
    sizes = [(300, 400), (500, 200), (120, 640)]
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in sizes]
    windows = torch.tensor([[10, 20, 50, 60], [100, 30, 80, 40], [5, 300, 30, 90]])
    shapes, real = [], device_finish.padded_windows

    def recording(*args):
        padded = real(*args)
        shapes.append(tuple(padded.shape))
        return padded

    monkeypatch.setattr(device_finish, "padded_windows", recording)
    out = device_finish.crop_resize_flip(images, windows, torch.zeros(3, dtype=torch.bool), 24)
    assert out.shape == (3, 3, 24, 24)
    assert shapes == [(3, 3, 80, 90)]  # the tallest and the widest window; the images: 500, 640
