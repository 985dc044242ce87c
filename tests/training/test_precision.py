"""fp16 with gradient accumulation in Keras `model.fit`: one loss scale per optimizer step.

Keras' loss-scale optimizer around Horovod's accumulating optimizer would update the scale (and
count its good steps) after every micro-batch, mixing scales within one accumulated step. In
training.tensorflow.loss_scale it sits inside Horovod's optimizer, so its good-step counter counts
optimizer steps, and both workers take the same decisions (identical weights). fp16 in the
other flavours and without accumulation: tests/training/test_resume.py; bf16 in every flavour:
test_tf_training.py::test_every_speed_option_together and
test_torch_training.py (the real model's run).
"""

import numpy as np
import pytest
from conftest import TINY, launch

pytestmark = pytest.mark.slow

EPOCHS, STEPS, ACCUM = 3, 5, 2


def test_keras_fp16_with_accumulation_updates_the_loss_scale_once_per_step(tmp_path):
    import tensorflow as tf

    args = [*TINY, "--batch-size", 8, "--grad-accum", ACCUM, "--precision", "fp16"]
    args += ["--epochs", EPOCHS, "--steps-per-epoch", STEPS, "--base-lr", 1]
    args += ["--checkpoint-dir", tmp_path / "ckpt", "--dump-weights", tmp_path / "w"]
    run = launch("keras", 2, args)
    assert run.returncode == 0, run.output
    losses = run.losses()
    assert len(losses) == EPOCHS and losses[-1] < 0.8 * losses[0], losses

    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt" / f"ckpt-{EPOCHS:05d}"))
    values = {
        key.split("/")[-3]: reader.get_tensor(key)
        for key in reader.get_variable_to_shape_map()
        if key.startswith("optimizer/") and key.endswith("/.ATTRIBUTES/VARIABLE_VALUE")
    }
    assert values["good_steps"] == EPOCHS * STEPS  # optimizer steps, not micro-batches
    assert values["_iterations"] == EPOCHS * STEPS * ACCUM  # what Keras counts: micro-batches
    assert values["current_loss_scale"] == 2.0**15  # no overflow, no growth (2000 steps)

    with np.load(tmp_path / "w" / "rank-0.npz") as w0, np.load(tmp_path / "w" / "rank-1.npz") as w1:
        for key in w0.files:
            np.testing.assert_array_equal(w0[key], w1[key])
