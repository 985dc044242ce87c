"""fp16 with gradient accumulation in Keras `model.fit`: one loss scale per optimizer step.

Keras' loss-scale optimizer around Horovod's accumulating optimizer would update the scale (and
count its good steps) after every micro-batch, mixing scales within one accumulated step. In
training.tensorflow.loss_scale it sits inside Horovod's optimizer, so its good-step counter counts
optimizer steps, and both workers take the same decisions (identical weights). fp16 in the
other flavours and without accumulation: tests/training/test_resume.py. With --fp16-allreduce,
Horovod compresses the scaled gradients (a gradient fp16 can't hold unscaled still moves the
weights), as the PyTorch flavour and the TF loop do. bf16 in every flavour:
test_tf_training.py::test_every_speed_option_together and
test_torch_training.py (the real model's run).
"""

import numpy as np
import pytest
from worker_runs import TINY, launch

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


# One step of a one-layer model whose gradient (2.5e-8 per weight) is below fp16's smallest
# subnormal (6e-8) unscaled, but 8.2e-4 at the initial loss scale 2^15: compressed to fp16
# before unscaling it would arrive as 0 and the weights would not move.
SCALED_ALLREDUCE = """
import json, sys
import numpy as np
import tensorflow as tf
from training import options
from training.tensorflow import tf_worker, train_keras

GRADIENT, LR = 2.5e-8, 1e6
args = options.parse_args("keras", sys.argv[1:])
hvd = tf_worker.setup(args)
model = tf.keras.Sequential([
    tf.keras.Input((4,)), tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")
])
model.compile(
    optimizer=train_keras.distributed_optimizer(args, LR),
    loss=lambda y, p: GRADIENT * tf.reduce_sum(tf.cast(p, tf.float32), axis=-1),
    jit_compile=False,
)
x, y = np.ones((8, 4), "float32"), np.zeros((8, 1), "float32")
model.fit(x, y, batch_size=args.batch_size, verbose=0)
if hvd.rank() == 0:
    print("KERNEL", json.dumps(model.get_weights()[0].ravel().tolist()))
"""


@pytest.mark.parametrize("accum", [1, 2])
def test_keras_fp16_allreduce_compresses_the_scaled_gradients(tmp_path, accum):
    """As the PyTorch flavour (GradScaler) and the TF loop do: 2 workers, fp16 compression."""
    import json
    import re
    import subprocess

    from azdl.envs import PACKAGES_ROOT, training_bin, training_env
    from azdl.launchers import local_horovodrun

    script = tmp_path / "scaled_allreduce.py"
    script.write_text(SCALED_ALLREDUCE)
    argv = ["--precision", "fp16", "--fp16-allreduce", "--batch-size", str(8 // accum)]
    argv += ["--grad-accum", str(accum)]
    proc = subprocess.run(
        [*local_horovodrun(str(training_bin("python")), 2),
         str(training_bin("python")), str(script), *argv],
        cwd=PACKAGES_ROOT,
        env=training_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    kernel = json.loads(re.search(r"KERNEL (\[.*\])", proc.stdout).group(1))
    # One SGD step (momentum starts at zero): w = -lr · g, to fp16's precision.
    assert kernel == pytest.approx([-1e6 * 2.5e-8] * 4, rel=2e-3), proc.stdout
