"""`azdl data …` without a storage service: argument hand-over to the training environment and
the errors that must come before any network call."""

import argparse
import json

import pytest

from azdl import staging
from azdl.cli import main
from azdl.commands import data
from azdl.errors import AzdlError
from azdl.jobs import stack_outputs
from training.data.copy_shards import COPY_OPTIONS
from training.data.prepare.manifest import load_manifest
from training.data.prepare.options import PREPARE_OPTIONS, SAMPLE_OPTIONS, add_options, to_argv


@pytest.mark.parametrize(
    ("options", "argv"),
    [
        (
            PREPARE_OPTIONS,
            [
                "--input",
                "in",
                "--output",
                "out",
                "--train-shards",
                "8",
                "--resize",
                "256",
                "--max-size",
                "640",
                "--skip-bad",
                "--overwrite",
            ],
        ),
        (SAMPLE_OPTIONS, ["demo", "--classes", "3", "--validation-layout", "folders", "--messy"]),
        (COPY_OPTIONS, ["--source", "/mnt/blob", "--dest", "/mnt/nvme", "--timeout", "60"]),
        (COPY_OPTIONS, ["--all", "--source", "/mnt/blob", "--dest", "/mnt/nfs", "--job-id", "j1"]),
    ],
)
def test_options_survive_the_hand_over_to_the_training_environment(options, argv):
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    parsed = parser.parse_args(argv)
    assert parser.parse_args(to_argv(parsed, options)) == parsed


def test_sample_and_prepare_run_in_the_operator_environment(tmp_path, capsys):
    """No TensorFlow, PyTorch or Horovod here: the sample and its shards are written by the
    operator environment itself, with shard counts that fit the sample, and read back."""
    import importlib.util

    from training.data.records import image_record
    from training.data.shards import list_shards
    from training.data.tfrecord import read_file

    for package in ("tensorflow", "torch", "horovod"):
        assert importlib.util.find_spec(package) is None, f"{package} in the operator environment"
    assert main(["data", "sample", str(tmp_path / "jpeg")]) == 0
    assert (
        main(
            [
                "data",
                "prepare",
                "--input",
                str(tmp_path / "jpeg"),
                "--output",
                str(tmp_path / "tfr"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert (
        "train: 48 images in 48 shards" in printed
        and "validation: 12 images in 12 shards" in printed
    )
    labels = [
        image_record(b).label for s in list_shards(tmp_path / "tfr", "train") for b in read_file(s)
    ]
    assert sorted(labels) == sorted(list(range(4)) * 12)


def test_prepare_says_which_shard_counts_fit_the_images(tmp_path, capsys):
    assert main(["data", "sample", str(tmp_path / "jpeg")]) == 0
    argv = ["data", "prepare", "--input", str(tmp_path / "jpeg"), "--output", str(tmp_path / "o")]
    assert main([*argv, "--train-shards", "1024"]) == 2
    err = capsys.readouterr().err
    assert (
        "--train-shards 1024 is not possible with 48 train images; allowed: 1 to 48, "
        "or leave --train-shards out" in err
    )
    assert not (tmp_path / "o").exists()


def test_max_size_caps_the_longer_side_of_the_stored_jpegs(tmp_path, capsys):
    """Real JPEGs through `azdl data prepare --max-size`: every stored image (decoded by Pillow,
    not read from the record's own height and width) has its longer side within the cap, its
    record says its decoded size, and an image already within the cap is stored byte for byte."""
    import io

    from PIL import Image

    from training.data.records import image_record
    from training.data.shards import list_shards
    from training.data.tfrecord import read_file

    source = tmp_path / "jpeg"
    argv = ["data", "sample", str(source), "--classes", "2", "--train-per-class", "6"]
    assert main([*argv, "--validation-per-class", "0", "--size", "120"]) == 0
    originals = {p.name: p.read_bytes() for p in source.glob("train/*/*.JPEG")}
    sides = {name: max(Image.open(io.BytesIO(b)).size) for name, b in originals.items()}
    cap = 120
    assert min(sides.values()) <= cap < max(sides.values())  # both kinds in the sample
    argv = ["data", "prepare", "--input", str(source), "--output", str(tmp_path / "tfr")]
    assert main([*argv, "--splits", "train", "--max-size", str(cap)]) == 0
    stored = [image_record(b) for s in list_shards(tmp_path / "tfr", "train") for b in read_file(s)]
    assert len(stored) == len(originals)
    for record in stored:
        name = record.filename.rsplit("/", 1)[-1]
        with Image.open(io.BytesIO(record.jpeg)) as image:
            assert image.format == "JPEG" and (image.height, image.width) == (
                record.height,
                record.width,
            )
            if sides[name] <= cap:
                assert record.jpeg == originals[name]
            else:
                assert max(image.size) in (cap, cap - 1), (name, image.size)  # rounding
    assert load_manifest(tmp_path / "tfr").options["max_size"] == cap


@pytest.mark.parametrize("value", ["0", "-5", "31"])
def test_a_max_size_too_small_is_one_error_line_before_anything_is_written(tmp_path, capsys, value):
    assert main(["data", "sample", str(tmp_path / "jpeg"), "--classes", "1"]) == 0
    capsys.readouterr()
    argv = ["data", "prepare", "--input", str(tmp_path / "jpeg"), "--output", str(tmp_path / "o")]
    assert main([*argv, "--max-size", value]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"error: --max-size must be at least 32 pixels, got {value} (leave it out to store the "
        "images at their own size)"
    ]
    assert not (tmp_path / "o").exists()


def test_copy_runs_in_the_training_environment(monkeypatch):
    calls = []
    monkeypatch.setattr(data, "run_training_module", lambda m, a: calls.append((m, a)) or 0)
    assert main(["data", "copy", "--source", "in", "--dest", "out"]) == 0
    module, argv = calls[0]
    assert module == "training.data.copy_shards"
    assert argv[:4] == ["--source", "in", "--dest", "out"]


def test_stage_needs_a_manifest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(staging.CONNECTION_STRING_ENV, "UseDevelopmentStorage=true")
    assert main(["data", "stage", str(tmp_path), "--container", "data"]) == 2
    assert "no manifest at" in capsys.readouterr().err


def test_stage_refuses_a_connection_string_for_a_real_account():
    real = "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=bm90LWEta2V5;"
    with pytest.raises(AzdlError, match="only for the local emulator"):
        staging.container_client("data", None, real)


def shards_folder(folder):
    """A folder as `azdl data prepare` leaves it: a manifest and the shard it lists."""
    from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary

    shard = ShardEntry("train-00000-of-00001", "train", 1, 10, "0" * 32, "0" * 64)
    Manifest({"n1": 0}, {"train": SplitSummary(1, 1, {"n1": 1})}, [shard]).write(folder)
    (folder / shard.name).write_bytes(b"0123456789")
    return folder


def test_stage_needs_an_account_and_a_container(tmp_path, monkeypatch, capsys):
    shards_folder(tmp_path)
    monkeypatch.delenv(staging.CONNECTION_STRING_ENV, raising=False)
    assert main(["data", "stage", str(tmp_path), "--account-url", "https://x.blob"]) == 2
    assert "no container" in capsys.readouterr().err
    for where in (["--outputs", "o.json"], ["--stack", "dev"]):
        with pytest.raises(SystemExit):
            main(["data", "stage", str(tmp_path), *where, "--account-url", "https://x.blob"])
        assert "not allowed with argument" in capsys.readouterr().err


def _stack_outputs(**extra) -> dict:
    """Every output the job tools require (whatever they are), plus the data account's."""
    values = {key: f"{key}-value" for key in stack_outputs.REQUIRED}
    values |= {
        "clusterVmSize": "Standard_ND96isr_H100_v5",
        "clusterMaxNodes": 2.0,
        "environments": {"tensorflow": "env-tf", "pytorch": "env-torch"},
        "dataAccountUrl": "https://azdldevdata.blob.core.windows.net/",
        "dataContainerName": "training-data",
    }
    return values | extra


@pytest.mark.parametrize("where", ["--stack", "--outputs"])
def test_stage_reads_the_target_from_the_stack_as_submit_does(where, tmp_path, monkeypatch):
    """--stack and --outputs are read as submit reads them; the container defaults to the
    stack's, and --container overrides it."""
    shards_folder(tmp_path)
    outputs_file = tmp_path / "outputs.json"
    outputs_file.write_text(json.dumps(_stack_outputs()))
    loaded, targets = [], []

    def read(stack, path):
        loaded.append((stack, path))
        return _stack_outputs(), "test outputs"

    monkeypatch.delenv(staging.CONNECTION_STRING_ENV, raising=False)
    monkeypatch.setattr(stack_outputs, "read_outputs", read)
    monkeypatch.setattr(
        staging, "container_client", lambda c, url, cs: targets.append((c, url, cs)) or 0
    )
    monkeypatch.setattr(staging, "stage", lambda *a: staging.StageReport())
    value = "dev" if where == "--stack" else str(outputs_file)
    assert main(["data", "stage", str(tmp_path), where, value]) == 0
    assert main(["data", "stage", str(tmp_path), where, value, "--container", "other"]) == 0
    url = "https://azdldevdata.blob.core.windows.net/"
    assert targets == [("training-data", url, None), ("other", url, None)]
    expected = ("dev", None) if where == "--stack" else (None, outputs_file)
    assert loaded == [expected, expected]


def test_stack_outputs_name_the_account_and_container(tmp_path, capsys):
    shards_folder(tmp_path)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(_stack_outputs(dataAccountUrl=None)))
    assert main(["data", "stage", str(tmp_path), "--outputs", str(outputs)]) == 2
    assert "has no dataAccountUrl; is the stack deployed" in capsys.readouterr().err
    outputs.write_text(json.dumps(["not", "an", "object"]))
    assert main(["data", "stage", str(tmp_path), "--outputs", str(outputs)]) == 2
    assert "expected a JSON object of stack outputs" in capsys.readouterr().err
    # Staging needs only the storage outputs: a stack whose cluster and images are not
    # deployed yet (or an older one) can be filled already.
    url = "https://azdldevdata.blob.core.windows.net/"
    only_storage = {"dataAccountUrl": url, "dataContainerName": "training-data"}
    assert staging.target_from_outputs(only_storage, "outputs.json") == (url, "training-data")


def test_stage_refuses_a_negative_sample(tmp_path, capsys):
    assert main(["data", "stage", str(tmp_path), "--verify-sample", "-1"]) == 2
    assert "--verify-sample must be 0 or more, got -1" in capsys.readouterr().err


def test_stage_lists_shards_missing_locally_before_any_upload(tmp_path, monkeypatch, capsys):
    shards_folder(tmp_path)
    (tmp_path / "train-00000-of-00001").unlink()
    monkeypatch.setenv(staging.CONNECTION_STRING_ENV, "UseDevelopmentStorage=true")
    assert main(["data", "stage", str(tmp_path), "--container", "data"]) == 2
    assert "1 shard(s) listed in the manifest are not in" in capsys.readouterr().err


def test_stage_names_a_local_mistake_before_reading_the_stack_or_signing_in(
    tmp_path, monkeypatch, capsys
):
    """A missing folder, a file where the folder goes, or a folder without its manifest is
    named first: neither the stack's outputs nor a credential is asked for."""

    def remote(*args):
        raise AssertionError("reached the stack or the sign-in before the local check")

    monkeypatch.setattr(stack_outputs, "read_outputs", remote)
    monkeypatch.setattr(staging, "container_client", remote)
    (tmp_path / "shards.tar").write_text("x")
    for folder, said in (
        (tmp_path / "nowhere", "nowhere does not exist; give the folder"),
        (tmp_path / "shards.tar", "shards.tar is a file; give the folder of the shards"),
        (tmp_path, "no manifest at"),
    ):
        assert main(["data", "stage", str(folder), "--stack", "dev"]) == 2
        assert said in capsys.readouterr().err


def sample_with_bad_images(tmp_path):
    """`azdl data sample`'s dataset, with one train class's every image unreadable: a file that
    is no image at all, and a JPEG cut in half."""
    assert main(["data", "sample", str(tmp_path / "jpeg")]) == 0
    first = sorted((tmp_path / "jpeg" / "train").iterdir())[0]
    images = sorted(first.iterdir())
    images[0].write_text("not an image")
    for image in images[1:]:
        image.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    return tmp_path / "jpeg", images


def test_prepare_names_each_bad_image_and_why_and_writes_no_empty_shard(tmp_path, capsys):
    source, bad = sample_with_bad_images(tmp_path)
    out = tmp_path / "shards"
    argv = [
        "data",
        "prepare",
        "--input",
        str(source),
        "--output",
        str(out),
        "--splits",
        "train",
        "--train-shards",
        "48",
    ]  # fmt: skip  (one image per shard: 12 of them all bad)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"  {bad[0]}: UnidentifiedImageError: not an image Pillow can read (12 bytes; " in err
    assert f"  {bad[1]}: OSError: image file is truncated" in err
    assert "BytesIO" not in err
    assert not out.exists() or list(out.iterdir()) == []

    assert main([*argv, "--skip-bad"]) == 0
    printed = capsys.readouterr().out
    assert f"skipped unreadable image: {bad[0]} (UnidentifiedImageError: not an image" in printed
    manifest = load_manifest(out)
    # The 12 shards of a bad image each are gone; the 36 others are numbered 0..35 of 36, as
    # their names and the manifest say.
    names = sorted(p.name for p in out.iterdir() if p.name != "manifest.json")
    assert names == [f"train-{i:05d}-of-00036" for i in range(36)]
    assert [s.name for s in manifest.shards] == names
    assert all(s.num_examples > 0 and s.size > 0 for s in manifest.shards)
    assert manifest.splits["train"].num_shards == 36
    assert manifest.splits["train"].num_examples == 48 - len(bad)


def test_prepare_names_a_file_given_where_a_folder_goes(tmp_path, capsys):
    (tmp_path / "train.tar").write_text("x")
    argv = ["data", "prepare", "--input", str(tmp_path / "train.tar"), "--output", str(tmp_path)]
    assert main(argv) == 2
    assert "--input " + str(tmp_path / "train.tar") + " is a file; give the folder" in (
        capsys.readouterr().err
    )
    assert main(["data", "sample", str(tmp_path / "jpeg")]) == 0
    argv = ["data", "prepare", "--input", str(tmp_path / "jpeg"), "--output",
            str(tmp_path / "train.tar")]  # fmt: skip
    assert main(argv) == 2
    assert "train.tar is a file; give a folder for the shards" in capsys.readouterr().err
