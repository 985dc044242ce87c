"""Resume after a worker is SIGKILLed mid-epoch, in every flavour, in fp16.

Rank 0 checkpoints every epoch and every `--checkpoint-every-steps` steps. The run is killed
just after a mid-epoch checkpoint; the relaunched job must resume at that checkpoint's epoch
*and step*, train only the steps after it, and end with the same weights as a run that was
never interrupted (synthetic data: every step sees the same batch, so any gap in what a
checkpoint holds - momentum, the learning-rate position, the fp16 loss scale - shows up as a
difference). fp16 on the CPU: torch autocast and Keras' mixed_float16 both run there (slowly).
"""

import json
import re
import signal
import subprocess
import time

import numpy as np
import psutil
import pytest
from worker_runs import TINY, launch

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.local import launch_command
from training.flavours import FLAVOURS
from training.throughput import parse_throughput_lines

pytestmark = pytest.mark.slow

EPOCHS, STEPS, EVERY = 4, 25, 10  # mid-epoch checkpoints at steps 10 and 20 (5, 15 in epoch 2)


def _worker(job: psutil.Process, rank: int) -> psutil.Process | None:
    for child in job.children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
            if any(m in cmdline for m in (f.entry_module for f in FLAVOURS.values())) and (
                child.environ().get("HOROVOD_RANK") == str(rank)
            ):
                return child
        except psutil.Error:
            continue
    return None


def _progress(ckpt):
    try:
        return json.loads((ckpt / "progress.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _weights(directory):
    with np.load(directory / "rank-0.npz") as npz:
        return {k: npz[k] for k in npz.files}


def _killed_mid_epoch(framework, args, ckpt) -> dict:
    """Start a run, SIGKILL rank 1 right after a mid-epoch checkpoint of epoch 2 or later;
    the progress the run left behind."""
    cmd = launch_command(framework, 2, "horovod", [str(a) for a in args])
    job = subprocess.Popen(
        cmd, cwd=PACKAGES_ROOT, env=training_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 180
        # 10 steps to the next checkpoint: rank 0 can't get there once rank 1 is gone.
        while (seen := _progress(ckpt)) is None or not (seen["epoch"] >= 1 and seen["step"]):
            assert job.poll() is None, job.stdout.read().decode()
            assert time.monotonic() < deadline, "no mid-epoch checkpoint in time"
            time.sleep(0.01)
        victim = _worker(psutil.Process(job.pid), rank=1)
        assert victim is not None, "rank 1 worker not found"
        victim.send_signal(signal.SIGKILL)
        job.wait(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0  # the launcher stopped the job when a worker died
    return _progress(ckpt)


@pytest.mark.parametrize("framework", ["keras", "tf", "torch"])
def test_relaunch_resumes_at_the_step_of_the_last_checkpoint(framework, tmp_path):
    ckpt = tmp_path / "ckpt"
    args = [*TINY, "--batch-size", 8, "--epochs", EPOCHS, "--steps-per-epoch", STEPS]
    args += ["--base-lr", "1", "--precision", "fp16", "--timing-warmup-steps", 0]
    ref_ckpt = ["--checkpoint-dir", tmp_path / "ref-ckpt"]
    reference = launch(framework, 2, [*args, *ref_ckpt, "--dump-weights", tmp_path / "ref"])
    assert reference.returncode == 0, reference.output
    losses = reference.losses()  # fp16 training learns (2 workers, loss-scaled)
    assert len(losses) == EPOCHS and losses[-1] < 0.8 * losses[0], losses
    args += ["--checkpoint-dir", ckpt, "--checkpoint-every-steps", EVERY]

    left = _killed_mid_epoch(framework, args, ckpt)
    assert left["step"] > 0 and left["checkpoint"].endswith(f"-s{left['step']:06d}"), left
    assert left["global_step"] == left["epoch"] * STEPS + left["step"]

    resumed = launch(framework, 2, [*args, "--dump-weights", tmp_path / "resumed"])
    assert resumed.returncode == 0, resumed.output
    where = f"at epoch {left['epoch']}, step {left['step']} of epoch {left['epoch'] + 1}"
    assert re.search(rf"resuming from \S+ {where} \(step {left['global_step']}\)", resumed.output)
    final = _progress(ckpt)
    assert final["epoch"] == EPOCHS and final["global_step"] == EPOCHS * STEPS
    assert final["step"] == 0 and final["checkpoint"] == f"ckpt-{EPOCHS:05d}"
    (record,) = parse_throughput_lines(resumed.output)  # every step after the checkpoint, once
    assert record["timed_steps"] == EPOCHS * STEPS - left["global_step"]
    assert record["precision"] == "fp16"

    ref, out = _weights(tmp_path / "ref"), _weights(tmp_path / "resumed")
    assert ref.keys() == out.keys()
    for name in ref:
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # The fp16 loss scale and its count of good steps went on from the checkpoint, not afresh.
    final = f"ckpt-{EPOCHS:05d}"
    assert _loss_scale(framework, ckpt / final) == _loss_scale(
        framework, tmp_path / "ref-ckpt" / final
    )


def _loss_scale(framework, path) -> dict:
    """The loss-scale state in a checkpoint: torch's GradScaler, Keras' LossScaleOptimizer."""
    if framework == "torch":
        import torch

        return torch.load(f"{path}.pt")["scaler"]
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(path))
    keys = [k for k in reader.get_variable_to_shape_map() if "loss_scale" in k]
    assert len(keys) == 2, keys  # current_loss_scale, good_steps
    return {k: float(reader.get_tensor(k)) for k in keys}
