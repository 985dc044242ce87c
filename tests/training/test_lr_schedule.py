"""The learning rate and the epoch length agree across the three flavours (2 real workers).

Each flavour trains 3 epochs of one pass over 64 synthetic images with 16 images per optimizer
step (Keras and PyTorch: batch 4 × 2 accumulated micro-batches; the TF loop: batch 8), so
4 optimizer steps an epoch; 16 is twice --base-batch, so the rate warms up from --base-lr 1
to 2, over a fractional warm-up (1.5 epochs), and a step decay follows at epoch 2.
The rate rank 0 logs for each epoch (its last step's) must be `schedule.lr_at` at that step.
(Horovod's Keras warm-up callback, used before, compared the whole-number epoch with the
warm-up end, so it warmed up through all of epoch 2, and ran one step ahead; and with
accumulation a Keras epoch was 2 passes.)
"""

import pytest
from worker_runs import TINY, launch

from training import schedule
from training.throughput import parse_throughput_lines

pytestmark = pytest.mark.slow

EPOCHS, STEPS, WARMUP = 3, 4, 1.5
SCHEDULE = [
    "--base-lr", 1, "--base-batch", 8, "--momentum", 0, "--warmup-epochs", WARMUP,
    "--lr-decay", "step", "--decay-epochs", 2, "--decay-factor", 0.1,
]  # fmt: skip
BATCH = {"keras": ["--batch-size", 4, "--grad-accum", 2], "tf": ["--batch-size", 8]}
BATCH["torch"] = BATCH["keras"]


@pytest.mark.parametrize("framework", ["keras", "tf", "torch"])
def test_logged_rate_follows_the_schedule_and_an_epoch_is_one_pass(framework):
    args = [*TINY, *SCHEDULE, *BATCH[framework], "--synthetic-length", 64]
    args += ["--epochs", EPOCHS, "--timing-warmup-steps", 2]
    run = launch(framework, 2, args)
    assert run.returncode == 0, run.output

    def lr_at(epoch):
        return schedule.lr_at(
            epoch, peak=2.0, base=1.0, warmup_epochs=WARMUP, decay="step", epochs=EPOCHS,
            decay_epochs=(2,), decay_factor=0.1,
        )  # fmt: skip

    expected = [lr_at(epoch + (STEPS - 1) / STEPS) for epoch in range(EPOCHS)]
    # Global batch 16 = 2 × --base-batch: warm-up from the base rate 1 to the peak 2.
    assert expected == pytest.approx([1.5, 2.0, 0.2])  # mid-warm-up, peak, decayed
    assert run.metric("lr") == pytest.approx(expected, rel=1e-3), run.output

    (record,) = parse_throughput_lines(run.output)
    assert record["timed_steps"] == EPOCHS * STEPS - 2  # optimizer steps
    assert record["images_timed"] == record["timed_steps"] * 16
    assert record["grad_accum"] == (1 if framework == "tf" else 2)
