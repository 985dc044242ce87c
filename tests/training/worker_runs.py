"""What the multi-process training tests share: launch N real workers, write a tiny TFRecord
set, read losses and metrics from a run's output, find a live worker's process."""

import os
import re
import subprocess
import time
from dataclasses import dataclass

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.local import launch_command

# Small, fast and learnable: the tiny conv net on 32 px images of 4 classes.
TINY = ["--model", "tiny", "--image-size", "32", "--num-classes", "4", "--warmup-epochs", "0"]
# --straggler-factor for a balanced run that must name no straggler. This machine's 2 cores are
# shared: a balanced run's ranks measured up to 1.65x apart in their training threads' CPU time
# under a load average of 9 (2026-11-26); a slow rank: tests/training/test_stragglers.py.
BALANCED_FACTOR = 2.5


@dataclass
class Run:
    returncode: int
    output: str  # stdout and stderr of every worker and the launcher
    started_ms: int = 0  # when it was launched (epoch milliseconds)

    def losses(self) -> list[float]:
        """The training loss of every epoch, as rank 0 prints it (Keras and the TF loop)."""
        # Keras prints small values as 1.7117e-04.
        return [float(x) for x in re.findall(r"\bloss: ([0-9.]+(?:e[+-]?[0-9]+)?)", self.output)]

    def metric(self, name: str) -> list[float]:
        """Every value of `name` in rank 0's epoch lines (`name: value`; all three flavours)."""
        return [float(x) for x in re.findall(rf"\b{name}: ([0-9.e+-]+)", self.output)]


def launch(
    framework, workers, args, launcher="horovod", timeout=240, transport="gloo", env=None
) -> Run:
    cmd = launch_command(framework, workers, launcher, [str(a) for a in args], transport=transport)
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "1", **(env or {})})
    started_ms = time.time_ns() // 1_000_000
    proc = subprocess.run(
        cmd,
        cwd=PACKAGES_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, started_ms)


def write_tiny_tfrecords(directory, train_shards=2, validation_shards=2, per_shard=24, classes=4):
    """JPEG shards in THE schema (training.data.records): each class a flat colour plus noise."""
    import numpy as np
    import tensorflow as tf

    from training.data import records

    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, size=(classes, 3))
    directory.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train_shards), ("validation", validation_shards)):
        for index in range(count):
            path = directory / records.shard_name(split, index, count)
            with tf.io.TFRecordWriter(str(path)) as writer:
                for i in range(per_shard):
                    label = int(rng.integers(classes))
                    h, w = int(rng.integers(36, 60)), int(rng.integers(36, 60))
                    noise = rng.integers(-40, 40, size=(h, w, 3))
                    pixels = np.clip(colours[label] + noise, 0, 255).astype(np.uint8)
                    jpeg = tf.io.encode_jpeg(pixels).numpy()
                    name = f"{split}_{index}_{i}.JPEG"
                    writer.write(records.serialize_example(jpeg, label, h, w, name))
    return directory


def worker_pids(module: str, marker: str, env_entry: str) -> list[int]:
    """Live workers running `python -m module` with `marker` in argv and `env_entry`
    (e.g. "HOROVOD_RANK=1") in their environment: the processes a test may SIGKILL (not the
    labeller that starts a torchrun worker and holds its command line: training.rank_output)."""
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv[1:3] == ["-m", module] and marker in argv and env_entry in environ:
            pids.append(int(entry))
    return pids
