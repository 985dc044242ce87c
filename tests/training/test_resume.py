"""Resume after a worker is SIGKILLed mid-run: the relaunched job continues from the last
checkpoint (rank 0 writes one per epoch), so at most one epoch of work is lost."""

import json
import signal
import subprocess
import time

import psutil
import pytest
from conftest import TINY, launch

from azdl.commands.train import launch_command
from azdl.envs import REPO_ROOT, training_env

pytestmark = pytest.mark.slow

EPOCHS, STEPS = 20, 25


def _worker(job: psutil.Process, rank: int) -> psutil.Process | None:
    for child in job.children(recursive=True):
        try:
            if "training.train_" in " ".join(child.cmdline()) and (
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


@pytest.mark.parametrize("framework", ["keras", "tf"])
def test_relaunch_resumes_from_the_last_checkpoint_after_sigkill(framework, tmp_path):
    ckpt = tmp_path / "ckpt"
    args = [*TINY, "--batch-size", 8, "--epochs", EPOCHS, "--steps-per-epoch", STEPS]
    args += ["--checkpoint-dir", ckpt, "--base-lr", "1"]
    cmd = launch_command(framework, 2, "gloo", [str(a) for a in args])
    job = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=training_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 180
        while (seen := _progress(ckpt)) is None or seen["epoch"] < 2:
            assert job.poll() is None, job.stdout.read().decode()
            assert time.monotonic() < deadline, "no checkpoint of epoch 2 in time"
            time.sleep(0.02)
        victim = _worker(psutil.Process(job.pid), rank=1)
        assert victim is not None, "rank 1 worker not found"
        victim.send_signal(signal.SIGKILL)
        job.wait(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0  # the launcher stopped the job when a worker died
    after_kill = _progress(ckpt)
    assert seen["epoch"] <= after_kill["epoch"] < EPOCHS  # killed mid-run, nothing lost

    resumed = launch(framework, 2, args)
    assert resumed.returncode == 0, resumed.output
    expected = f"at epoch {after_kill['epoch']} (step {after_kill['global_step']})"
    assert expected in resumed.output, resumed.output
    final = _progress(ckpt)
    assert final["epoch"] == EPOCHS and final["global_step"] == EPOCHS * STEPS
    # Only the epochs after the checkpoint ran again.
    assert resumed.output.count("Total images/sec") == 1
    assert len(resumed.losses()) == EPOCHS - after_kill["epoch"]
