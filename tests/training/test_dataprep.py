"""The converter on real JPEG files: ImageNet's mess (PNG named .JPEG, CMYK), unreadable files,
and every input error that must come before anything is written."""

import io
from pathlib import Path

import pytest
from PIL import Image

from training.data.prepare import convert as conv
from training.data.prepare.manifest import file_digests, load_manifest
from training.data.prepare.sample import LABELS_FILE, generate
from training.errors import TrainingError

SHARDS = {"train": 3, "validation": 2}


def _records(path: Path) -> list[dict]:
    import tensorflow as tf

    from training.tensorflow.pipeline import parse_example

    out = []
    for serialized in tf.data.TFRecordDataset(str(path)):
        f = parse_example(serialized)
        image = tf.io.decode_jpeg(f["image/encoded"], channels=3)  # every record is a real JPEG
        out.append(
            {
                "label": int(f["image/class/label"]),
                "filename": f["image/filename"].numpy().decode(),
                "shape": (int(f["image/height"]), int(f["image/width"])),
                "decoded": tuple(image.shape[:2]),
                "format": f["image/format"].numpy().decode(),
            }
        )
    return out


@pytest.mark.slow
def test_real_jpegs_with_imagenet_mess_convert_and_overwrite_needs_consent(tmp_path):
    source, out = tmp_path / "imagenet", tmp_path / "shards"
    generate(source, classes=3, train_per_class=5, validation_per_class=2, size=64, messy=True)

    manifest = conv.convert(source, out, ["train", "validation"], SHARDS, workers=2)

    assert manifest.label_map == {"n00000001": 0, "n00000002": 1, "n00000003": 2}
    assert manifest.splits["train"].num_examples == 17  # 15 + the PNG and the CMYK file
    assert manifest.splits["train"].class_counts == {"n00000001": 7, "n00000002": 5, "n00000003": 5}
    assert manifest.splits["validation"].class_counts == {f"n0000000{i}": 2 for i in (1, 2, 3)}
    assert {(Path(r["path"]).name, r["reason"]) for r in manifest.reencoded} == {
        ("n00000001_png.JPEG", "PNG file named .JPEG"),
        ("n00000001_cmyk.JPEG", "CMYK JPEG"),
    }
    assert manifest.skipped == []
    assert load_manifest(out) == manifest
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [s.name for s in manifest.shards] + ["manifest.json"]
    )

    labels = dict(line.split() for line in (source / LABELS_FILE).read_text().splitlines())
    seen = []
    for shard in manifest.shards:
        assert file_digests(out / shard.name) == (shard.size, shard.md5, shard.sha256)
        records = _records(out / shard.name)
        assert len(records) == shard.num_examples
        for r in records:
            wnid = labels.get(r["filename"]) or r["filename"].split("_")[0]
            assert r["label"] == manifest.label_map[wnid], r
            assert r["shape"] == r["decoded"] and r["format"] == "JPEG"
        seen += [(shard.split, r["filename"]) for r in records]
    assert len(seen) == len(set(seen)) == 17 + 6  # every image exactly once

    with pytest.raises(TrainingError, match=r"already holds .* pass --overwrite"):
        conv.convert(source, out, ["train"], {"train": 2})
    conv.convert(source, out, ["train"], {"train": 2}, workers=2, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "train-00000-of-00002",
        "train-00001-of-00002",
    ]


@pytest.mark.slow
def test_unreadable_images_fail_the_run_at_the_end_or_are_skipped_when_asked(tmp_path, capsys):
    source, out = tmp_path / "imagenet", tmp_path / "shards"
    generate(source, classes=2, train_per_class=4, validation_per_class=0, size=48)
    truncated = source / "train" / "n00000001" / "truncated.JPEG"
    good = (source / "train" / "n00000001" / "n00000001_0.JPEG").read_bytes()
    truncated.write_bytes(good[: len(good) // 2])
    not_an_image = source / "train" / "n00000002" / "notes.JPEG"
    not_an_image.write_text("not an image")
    argv = [
        "--input",
        str(source),
        "--output",
        str(out),
        "--splits",
        "train",
        "--train-shards",
        "2",
        "--workers",
        "1",
    ]

    assert conv.main(argv) == 2
    err = capsys.readouterr().err
    assert "2 unreadable image(s)" in err and str(truncated) in err and str(not_an_image) in err
    assert list(out.iterdir()) == []  # nothing written, no partial folder left behind

    assert conv.main([*argv, "--skip-bad"]) == 0
    assert "skipped unreadable image" in capsys.readouterr().out
    manifest = load_manifest(out)
    assert sorted(s["path"] for s in manifest.skipped) == sorted(
        [str(truncated), str(not_an_image)]
    )
    assert manifest.splits["train"].num_examples == 8


def test_input_errors_come_before_anything_is_written(tmp_path):
    source, out = tmp_path / "imagenet", tmp_path / "shards"
    generate(source, classes=2, train_per_class=2, validation_per_class=1, size=32)

    only_train = tmp_path / "only-train"
    (only_train / "train" / "n00000001").mkdir(parents=True)
    with pytest.raises(TrainingError, match="split 'validation' is missing"):
        conv.convert(only_train, out, ["train", "validation"], SHARDS)
    (source / "train" / "n00000003").mkdir()
    with pytest.raises(TrainingError, match=r"1 empty class folder.*n00000003"):
        conv.convert(source, out, ["train"], {"train": 1})
    (source / "train" / "n00000003").rmdir()
    (source / LABELS_FILE).rename(tmp_path / "labels.txt")
    with pytest.raises(TrainingError, match="need a labels file: --validation-labels"):
        conv.convert(source, out, ["validation"], {"validation": 1})
    with pytest.raises(TrainingError, match="--train-shards 5 is not possible with 4 train"):
        conv.convert(source, out, ["train"], {"train": 5})
    assert not out.exists()


def test_validation_labels_in_every_supported_form(tmp_path):
    source = tmp_path / "imagenet"
    generate(source, classes=2, train_per_class=1, validation_per_class=2, size=32)
    files = sorted((source / "validation").iterdir())
    wnids = ["n00000001", "n00000001", "n00000002", "n00000002"]

    ordered = tmp_path / "synsets.txt"
    ordered.write_text("\n".join(wnids) + "\n")
    kaggle = tmp_path / "LOC_val_solution.csv"
    kaggle.write_text(
        "ImageId,PredictionString\n"
        + "".join(f"{f.stem},{w} 1 2 3 4\n" for f, w in zip(files, wnids, strict=True))
    )
    for labels in (source / LABELS_FILE, ordered, kaggle):
        _, images = conv.scan(source, ["validation"], labels)
        assert [(Path(p).name, w) for p, w in images["validation"]] == [
            (f.name, w) for f, w in zip(files, wnids, strict=True)
        ], labels

    folders = tmp_path / "folders"
    generate(
        folders,
        classes=2,
        train_per_class=1,
        validation_per_class=1,
        size=32,
        validation_layout="folders",
    )
    label_map, images = conv.scan(folders, ["train", "validation"], None)
    assert sorted(w for _, w in images["validation"]) == ["n00000001", "n00000002"]
    assert label_map == {"n00000001": 0, "n00000002": 1}


def test_reencoding_and_resizing_options(tmp_path):
    buf = io.BytesIO()
    Image.new("RGB", (300, 200), (10, 200, 30)).save(buf, "JPEG", quality=95)
    path = tmp_path / "probe.JPEG"
    path.write_bytes(buf.getvalue())
    data, h, w, reason = conv.encode_image(str(path), conv.Encoding())
    assert (data, h, w, reason) == (buf.getvalue(), 200, 300, None)  # untouched by default
    data, h, w, reason = conv.encode_image(str(path), conv.Encoding(resize=100, quality=50))
    assert (h, w, reason) == (100, 150, None)
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "JPEG" and image.size == (150, 100)
    # --reencode: every image written anew at --quality, same size; not listed as a fix-up
    data, h, w, reason = conv.encode_image(str(path), conv.Encoding(reencode=True, quality=20))
    assert (h, w, reason) == (200, 300, None) and data != buf.getvalue()
    assert len(data) < len(buf.getvalue())
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "JPEG" and image.mode == "RGB" and image.size == (300, 200)


@pytest.mark.slow
def test_reencode_option_and_progress_lines_without_a_terminal(tmp_path, capsys, monkeypatch):
    source, out = tmp_path / "imagenet", tmp_path / "shards"
    generate(source, classes=2, train_per_class=6, validation_per_class=0, size=64)
    monkeypatch.setattr(conv, "LOG_EVERY_S", 0.0)  # a line for every image
    argv = ["--input", str(source), "--output", str(out), "--splits", "train"]
    argv += ["--train-shards", "1", "--workers", "1", "--reencode", "--quality", "20"]
    assert conv.main(argv) == 0
    stdout = capsys.readouterr().out
    # progress image by image, even within the run's only shard
    lines = [line for line in stdout.splitlines() if line.startswith("converted ")]
    assert [line.split()[1] for line in lines] == [f"{i}/12" for i in range(1, 13)]

    manifest = load_manifest(out)
    assert manifest.options["reencode"] is True and manifest.options["quality"] == 20
    assert manifest.reencoded == []  # --reencode is asked for, not a fix-up to report
    originals = {p.name: p.read_bytes() for p in (source / "train").rglob("*.JPEG")}
    import tensorflow as tf

    from training.tensorflow.pipeline import parse_example

    records = [parse_example(r) for r in tf.data.TFRecordDataset(str(out / "train-00000-of-00001"))]
    assert len(records) == 12
    for f in records:
        encoded = f["image/encoded"].numpy()
        assert encoded != originals[f["image/filename"].numpy().decode()]
        assert encoded[:2] == b"\xff\xd8"  # JPEG


def test_loose_images_beside_class_folders_are_reported(tmp_path):
    source = tmp_path / "imagenet"
    generate(
        source,
        classes=2,
        train_per_class=1,
        validation_per_class=1,
        size=32,
        validation_layout="folders",
    )
    stray = source / "validation" / "ILSVRC2012_val_00000001.JPEG"
    stray.write_bytes((source / "train" / "n00000001" / "n00000001_0.JPEG").read_bytes())
    with pytest.raises(TrainingError, match=r"holds class folders and also 1 image\(s\) outside"):
        conv.scan(source, ["train", "validation"], None)
    stray.rename(source / "train" / stray.name)
    with pytest.raises(TrainingError, match=r"ILSVRC2012_val_00000001.JPEG; move them into"):
        conv.scan(source, ["train"], None)


def test_workers_default_to_the_cores_this_process_may_use(tmp_path, monkeypatch):
    source = tmp_path / "imagenet"
    generate(source, classes=2, train_per_class=4, validation_per_class=0, size=32)
    monkeypatch.setattr(conv.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(conv.os, "sched_getaffinity", lambda pid: {0, 1})
    seen = []

    def run_tasks(tasks, workers, total):
        seen.append(workers)
        raise TrainingError("stop here")

    monkeypatch.setattr(conv, "_run_tasks", run_tasks)
    with pytest.raises(TrainingError, match="stop here"):
        conv.convert(source, tmp_path / "out", ["train"], {"train": 8})
    assert seen == [2]
