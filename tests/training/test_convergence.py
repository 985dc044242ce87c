"""Convergence with the default recipe: 2 Horovod workers learn a set a CNN has to learn.

The data (tests/training/learnable.py): 4 classes told apart only by the orientation of their
edges (horizontal or vertical stripes, checkerboard, diamonds) under random colours, periods,
sizes and grain; 320 training and 128 validation JPEGs, sharded by the project's converter
(training/data/prepare). Every flavour trains the same tiny CNN
(training/tensorflow/keras_models.py and training/torch/torch_models.py build the same network)
for EPOCHS epochs with the default recipe: weight decay 1e-4 on kernels, label smoothing 0.1,
momentum 0.9, 0.1 per 256 images scaled linearly (global batch 32: 0.0125, no warm-up needed),
step decay at epoch 30, random-resized-crop 8-100 % with per-rank seeds, flips. Only the run
length is shortened.

Threshold: validation accuracy of at least THRESHOLD within EPOCHS epochs. Chance is 25 %; on
128 balanced images a guesser reaches 40 % with probability below 1e-4 (binomial), so 60 %
cannot come from guessing or from colour (which carries no class information). Measured here
(docs/recipe.md, "Convergence test"): 0.75-0.81 in every flavour, so 0.6 leaves room for the
run-to-run noise of unordered reads. ResNet50 itself is too slow on the test machine's CPU to
train this far (about 1 image/s/core at 32 px); its equality across flavours is tested as a
function instead (test_recipe_units.py: the torch weights in the Keras model give the torch
logits).
"""

import time

import pytest
from learnable import write_folders
from worker_runs import launch

pytestmark = pytest.mark.slow

EPOCHS = 40
THRESHOLD = 0.6


@pytest.fixture(scope="module")
def patterns(tmp_path_factory):
    from training.data.prepare import convert

    root = tmp_path_factory.mktemp("patterns")
    write_folders(root / "images", train_per_class=80, validation_per_class=32)
    shards = root / "shards"
    argv = ["--input", str(root / "images"), "--output", str(shards), "--workers", "1"]
    assert convert.main([*argv, "--train-shards", "2", "--validation-shards", "2"]) == 0
    return shards


@pytest.mark.parametrize("framework", ["keras", "tf", "torch"])
def test_two_workers_learn_the_patterns_with_the_default_recipe(patterns, framework):
    started = time.perf_counter()
    args = [
        "--model", "tiny", "--data-dir", patterns, "--image-size", 32, "--num-classes", 4,
        "--batch-size", 16, "--epochs", EPOCHS, "--timing-warmup-steps", 0,
    ]  # fmt: skip
    run = launch(framework, 2, args, timeout=600)
    assert run.returncode == 0, run.output
    accuracy = run.metric("val_accuracy")
    assert len(accuracy) == EPOCHS, run.output
    reached = next((epoch for epoch, a in enumerate(accuracy, 1) if a >= THRESHOLD), None)
    print(
        f"convergence {framework}: val_accuracy {accuracy[-1]:.3f} after {EPOCHS} epochs "
        f"(best {max(accuracy):.3f}; {THRESHOLD} first at epoch {reached}); "
        f"{time.perf_counter() - started:.0f} s"
    )
    assert reached is not None, accuracy
