"""Horovod elastic (PyTorch): min 1, max 2 workers; killing one does not stop the run.

The host-discovery script names this machine twice, as `localhost` and as `127.0.0.1`, one slot
each. Horovod's elastic driver blacklists the *host* of a failed worker; with a single
`localhost:2` entry the survivor would be blacklisted along with the dead worker and the job
would stop. Two names for the one machine give each worker a host of its own.
"""

import os
import signal
import subprocess
import time

import pytest
from conftest import TINY, worker_pids

from azdl.envs import REPO_ROOT, training_bin, training_env

pytestmark = pytest.mark.slow

EPOCHS, STEPS = 6, 40


def test_killing_a_worker_does_not_stop_elastic_training(tmp_path):
    discovery = tmp_path / "discover-hosts.sh"
    discovery.write_text("#!/bin/sh\necho localhost:1\necho 127.0.0.1:1\n")
    discovery.chmod(0o755)
    cmd = [
        str(training_bin("horovodrun")),
        "-np", "2", "--min-np", "1", "--max-np", "2",
        "--host-discovery-script", str(discovery), "--gloo",
        str(training_bin("python")), "-m", "training.torch_elastic",
        *TINY, "--batch-size", "8", "--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS),
        "--lr-decay", "none", "--base-lr", "4", "--timing-warmup-steps", "2",
        "--commit-every", "2", "--dump-weights", str(tmp_path / "w"),
    ]  # fmt: skip
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "1"})
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen = []
    deadline = time.monotonic() + 180
    for line in proc.stdout:
        seen.append(line)
        if "epoch 2/" in line or time.monotonic() > deadline:
            break
    assert any("epoch 2/" in line and "workers: 2" in line for line in seen), "".join(seen)
    (victim,) = worker_pids(
        "training.torch_elastic", str(tmp_path / "w"), "HOROVOD_HOSTNAME=127.0.0.1"
    )
    os.kill(victim, signal.SIGKILL)
    output = "".join(seen) + proc.communicate(timeout=240)[0]

    assert proc.returncode == 0, output
    assert "workers changed: now 1" in output, output
    last_epoch = [line for line in output.splitlines() if f"epoch {EPOCHS}/{EPOCHS} - " in line]
    assert len(last_epoch) == 1 and last_epoch[0].endswith("workers: 1"), output
    assert "Elastic run finished with 1 worker(s) (started with 2, 1 reset(s))" in output, output
    assert '"workers": 1' in output  # the throughput record counts the workers at the end
    assert (tmp_path / "w" / "rank-0.npz").exists()
