"""Bad input stops a run with one clear `error: …` line (exit code 2) naming what is wrong.

The single-process cases run in one Python process (TensorFlow is imported once); the
more-workers-than-shards case needs 2 real workers.
"""

import json
import subprocess
import sys

import pytest
from worker_runs import TINY, launch, write_tiny_tfrecords

from azdl.envs import PACKAGES_ROOT, training_env

pytestmark = pytest.mark.slow

HARNESS = """
import contextlib, io, json, sys
from training.tensorflow import train_keras, train_loop
results = {}
for name, (framework, argv) in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = {"keras": train_keras, "tf": train_loop}[framework].main(argv)
        except SystemExit as exc:
            code = exc.code
    results[name] = [code, err.getvalue()]
print("RESULTS " + json.dumps(results))
"""


# Combinations refused by the option parser: argparse's usage line, then `error: …`.
ARGPARSE_CHECKS = ("elastic_accum", "every_steps_no_dir")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-input")
    good = write_tiny_tfrecords(root / "good", train_shards=1, validation_shards=1)
    corrupt = write_tiny_tfrecords(root / "corrupt", train_shards=2, validation_shards=0)
    shard = corrupt / "train-00001-of-00002"
    blob = bytearray(shard.read_bytes())
    blob[len(blob) // 2 : len(blob) // 2 + 8] = b"garbage!"
    shard.write_bytes(bytes(blob))
    empty = root / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no shards here")

    short = [*TINY, "--batch-size", "4", "--epochs", "1"]
    cases = {
        "missing_dir": ("keras", [*short, "--data-dir", str(root / "nope")]),
        "no_shards": ("tf", [*short, "--data-dir", str(empty)]),
        # Found while counting the records (TF loop) and while training (Keras).
        "corrupt_counting": ("tf", [*short, "--data-dir", str(corrupt)]),
        "corrupt_training": (
            "keras",
            [*short, "--data-dir", str(corrupt), "--steps-per-epoch", "30"],
        ),
        "label_too_big": (
            "tf",
            [*short, "--data-dir", str(good), "--steps-per-epoch", "3", "--num-classes", "2"],
        ),
        "label_below_offset": (
            "keras",
            [*short, "--data-dir", str(good), "--steps-per-epoch", "3", "--label-offset", "1"],
        ),
        "smoothing_one": ("tf", [*TINY, "--label-smoothing", "1"]),
        "batch_zero": ("keras", [*TINY, "--batch-size", "0"]),
        "unknown_model": ("tf", ["--model", "vgg16"]),
        "elastic_accum": ("keras", [*TINY, "--elastic", "--grad-accum", "2"]),
        "every_steps_no_dir": ("tf", [*TINY, "--checkpoint-every-steps", "100"]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", HARNESS, json.dumps(cases)],
        cwd=PACKAGES_ROOT,
        env=training_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line, proc.stdout + proc.stderr
    return {"root": root, **json.loads(line.removeprefix("RESULTS "))}


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing_dir", "data directory '{root}/nope' does not exist"),
        ("no_shards", "no train shards in '{root}/empty': expected files named like"),
        ("corrupt_counting", "corrupt TFRecord file '{root}/corrupt/train-00001-of-00002'"),
        ("corrupt_training", "corrupt TFRecord file '{root}/corrupt/train-00001-of-00002'"),
        ("label_too_big", "a label in the data is not a class index: label "),
        (
            "label_too_big",
            "not below --num-classes 2: raise --num-classes, or set --label-offset 1",
        ),
        ("label_below_offset", "is -1, below 0: lower --label-offset (0-based shards need 0)"),
        ("smoothing_one", "argument --label-smoothing: must be in [0, 1), got 1.0"),
        ("batch_zero", "argument --batch-size: must be at least 1, got 0"),
        (
            "unknown_model",
            "argument --model: invalid choice: 'vgg16' (choose from 'resnet50', 'tiny')",
        ),
        ("elastic_accum", "--elastic with --grad-accum > 1 is not supported by the Keras"),
        ("every_steps_no_dir", "--checkpoint-every-steps needs --checkpoint-dir"),
    ],
)
def test_bad_input_is_a_clear_error(results, case, message):
    code, stderr = results[case]
    assert code == 2, stderr
    assert message.format(root=results["root"]) in stderr, stderr
    if case not in ("batch_zero", "unknown_model", "smoothing_one", *ARGPARSE_CHECKS):
        assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr  # no traceback


def test_more_workers_than_shards(tmp_path):
    data = write_tiny_tfrecords(tmp_path / "data", train_shards=1, validation_shards=1)
    run = launch("tf", 2, [*TINY, "--batch-size", 4, "--data-dir", data])
    assert run.returncode != 0
    assert "error: 2 workers but only 1 shard(s)" in run.output, run.output
