"""Horovod elastic training: min 1, max 2 workers; killing one does not stop the run, in every
flavour (PyTorch: training.torch.train_elastic; Keras and the TF loop: `--elastic`).

The host-discovery script names this machine twice, as `localhost` and as `127.0.0.1`, one slot
each. Horovod's elastic driver blacklists the *host* of a failed worker; with a single
`localhost:2` entry the survivor would be blacklisted along with the dead worker and the job
would stop. Two names for the one machine give each worker a host of its own. (Horovod's own
elastic examples: horovod/horovod examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py and
tensorflow2_keras_mnist_elastic.py, launched with --min-np/--max-np/--host-discovery-script.)
"""

import os
import signal
import subprocess
import time

import pytest
from worker_runs import TINY, worker_pids

from azdl.envs import PACKAGES_ROOT, training_bin, training_env
from azdl.runtime import module_command
from training import events

pytestmark = pytest.mark.slow

EPOCHS, STEPS = 6, 40
ENTRY = {
    "torch": ["training.torch.train_elastic"],
    "keras": ["training.tensorflow.train_keras", "--elastic"],
    "tf": ["training.tensorflow.train_loop", "--elastic"],
}


@pytest.mark.parametrize("framework", ["torch", "keras", "tf"])
def test_killing_a_worker_does_not_stop_elastic_training(framework, tmp_path):
    discovery = tmp_path / "discover-hosts.sh"
    discovery.write_text("#!/bin/sh\necho localhost:1\necho 127.0.0.1:1\n")
    discovery.chmod(0o755)
    module, *flags = ENTRY[framework]
    ckpt = tmp_path / "ckpt"
    cmd = [
        *module_command("training.horovodrun", str(training_bin("python"))),
        "-np", "2", "--min-np", "1", "--max-np", "2",
        "--host-discovery-script", str(discovery), "--gloo",
        str(training_bin("python")), "-m", module, *flags,
        *TINY, "--batch-size", "8", "--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS),
        "--lr-decay", "none", "--base-lr", "4", "--timing-warmup-steps", "2",
        "--commit-every", "2", "--dump-weights", str(tmp_path / "w"), "--checkpoint-dir", ckpt,
    ]  # fmt: skip
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "1", events.DIR_ENV: str(tmp_path / "events")})
    proc = subprocess.Popen(
        cmd, cwd=PACKAGES_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen = []
    deadline = time.monotonic() + 180
    for line in proc.stdout:
        seen.append(line)
        if ("epoch 2/" in line and "workers: 2" in line) or time.monotonic() > deadline:
            break
    assert any("epoch 2/" in line and "workers: 2" in line for line in seen), "".join(seen)
    folder = tmp_path / "events"
    if framework == "torch":  # rank 0, once its epoch 2 is written: the survivor takes over
        victim = events_writer(folder, 2)
    else:
        (victim,) = worker_pids(module, str(tmp_path / "w"), "HOROVOD_HOSTNAME=127.0.0.1")
    os.kill(victim, signal.SIGKILL)
    output = "".join(seen) + proc.communicate(timeout=240)[0]

    assert proc.returncode == 0, output
    assert "workers changed: now 1" in output, output
    last_epoch = [line for line in output.splitlines() if f"epoch {EPOCHS}/{EPOCHS} - " in line]
    assert len(last_epoch) == 1 and last_epoch[0].rstrip().endswith("workers: 1"), output
    assert "Elastic run finished with 1 worker(s) (started with 2, 1 reset(s))" in output, output
    assert '"workers": 1' in output  # the throughput record counts the workers at the end
    assert (tmp_path / "w" / "rank-0.npz").exists()
    # Every step ran exactly once in the run's count: the rollback went back to a commit.
    assert f'"global_step": {EPOCHS * STEPS},' in (ckpt / "progress.json").read_text()
    if framework == "torch":  # each epoch's event, for the report's loss curve (twice: an
        # epoch the rollback ended again), from the first rank 0 and then the survivor
        ended = [e for e in events.read(folder) if e["event"] == "epoch"]
        assert sorted({e["epoch"] for e in ended}) == list(range(1, EPOCHS + 1)), ended
        assert len({e["process"] for e in ended}) == 2, ended
        assert all(e["values"]["loss"] > 0 for e in ended), ended


def events_writer(folder, epoch: int) -> int:
    """The pid of the process writing `folder`'s events (rank 0), once its `epoch` is there."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for e in events.read(folder):
            if e["event"] == "epoch" and e["epoch"] == epoch:
                return int(e["process"].rsplit("-", 1)[1])  # host-pid
        time.sleep(0.05)
    raise AssertionError(f"no epoch {epoch} event in {folder} after 60 s")
