"""`azdl train`: launch N Horovod workers on this machine, in the training environment.

Gloo (`horovodrun --gloo`) is the default launcher; `--launcher mpi` uses plain `mpirun`,
the way Azure ML starts workers on a cluster, so both paths are exercised locally. Without
script arguments it runs the demo: a short ResNet50 run on synthetic data that ends with the
throughput lines and the checkpoint path.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

from azdl.commands.options import add_script_args, positive_int, script_args
from azdl.envs import REPO_ROOT, training_bin, training_env
from azdl.errors import AzdlError

FRAMEWORK_MODULES = {
    "keras": "training.train_keras",
    "tf": "training.train_tf",
    "torch": "training.train_torch",
}
# The demo: ResNet50 small enough for 2 CPU workers to run 20 steps in about a minute.
DEMO_ARGS = [
    "--model", "resnet50", "--image-size", "64", "--num-classes", "10", "--batch-size", "16",
    "--epochs", "2", "--steps-per-epoch", "10", "--warmup-epochs", "1",
    "--timing-warmup-steps", "5",
]  # fmt: skip


# Horovod's background thread coordinates the workers every HOROVOD_CYCLE_TIME ms (default 1).
# With one CPU core per worker that thread takes its time from the training step: P2 measured
# 2 workers vs 1 at 0.69 with the default and 0.84 with 20 ms (README, Train). GPU clusters
# keep Horovod's default; a value already in the environment wins.
LOCAL_CYCLE_TIME_MS = "20"


def local_env(tf_log_level: str = "1") -> dict[str, str]:
    """Environment for local workers: the training venv, quieter TensorFlow logs (unless set),
    and the CPU-friendly Horovod cycle time (unless set)."""
    env = training_env()
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", tf_log_level)
    env.setdefault("HOROVOD_CYCLE_TIME", LOCAL_CYCLE_TIME_MS)
    return env


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="run Horovod training locally with N worker processes",
        description="Launch N Horovod workers on this machine. Arguments after `--` go to the "
        "training script (see `azdl train --framework keras -- --help`); without them, a short "
        "ResNet50 demo on synthetic data runs, checkpointing under runs/.",
    )
    p.add_argument("--framework", choices=sorted(FRAMEWORK_MODULES), default="keras")
    p.add_argument(
        "--workers", type=positive_int, default=2, help="number of worker processes (default 2)"
    )
    p.add_argument(
        "--launcher",
        choices=["gloo", "mpi"],
        default="gloo",
        help="gloo: horovodrun --gloo (default); mpi: plain mpirun, as Azure ML launches jobs",
    )
    add_script_args(p)
    p.set_defaults(func=run)


def demo_args(framework: str, workers: int) -> list[str]:
    """The demo's script arguments: a fresh run folder, the CPU cores shared among workers."""
    run_dir = REPO_ROOT / "runs" / f"demo-{framework}-{time.strftime('%Y%m%d-%H%M%S')}"
    threads = max(1, (os.cpu_count() or 1) // workers)
    return [
        *DEMO_ARGS,
        "--threads", str(threads),
        "--checkpoint-dir", str(run_dir / "checkpoints"),
        "--log-dir", str(run_dir / "tensorboard"),
    ]  # fmt: skip


def launch_command(
    framework: str, workers: int, launcher: str, script_args: list[str]
) -> list[str]:
    """The command line that starts `workers` processes of the framework's training script."""
    if workers < 1:
        raise AzdlError(f"--workers must be at least 1, got {workers}")
    if framework not in FRAMEWORK_MODULES:
        allowed = ", ".join(sorted(FRAMEWORK_MODULES))
        raise AzdlError(f"unknown framework {framework!r}; allowed: {allowed}")
    worker = [str(training_bin("python")), "-m", FRAMEWORK_MODULES[framework], *script_args]
    if launcher == "gloo":
        hosts = f"localhost:{workers}"
        return [
            str(training_bin("horovodrun")), "--gloo", "-np", str(workers), "-H", hosts, *worker,
        ]  # fmt: skip
    if launcher != "mpi":
        raise AzdlError(f"unknown launcher {launcher!r}; allowed: gloo, mpi")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise AzdlError("--launcher mpi needs Open MPI's mpirun (make setup-training installs it)")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    # More workers than cores is fine for a local try-out; Open MPI refuses it by default.
    oversubscribe = ["--oversubscribe"] if workers > (os.cpu_count() or 1) else []
    return [
        mpirun, *root, *oversubscribe, "-np", str(workers), "--bind-to", "none",
        "--map-by", "slot", "-x", "PYTHONPATH", "-x", "PATH", "-x", "TF_CPP_MIN_LOG_LEVEL",
        "-x", "HOROVOD_CYCLE_TIME",
        *worker,
    ]  # fmt: skip


def run(args: argparse.Namespace) -> int:
    training_args = list(script_args(args))
    if not training_args:
        training_args = demo_args(args.framework, args.workers)
        print(f"demo: {args.workers} workers, ResNet50 at 64 px on synthetic data", flush=True)
    cmd = launch_command(args.framework, args.workers, args.launcher, training_args)
    print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
    # TensorFlow's INFO lines (oneDNN, CPU features) drown the training output.
    return subprocess.call(cmd, env=local_env(), cwd=REPO_ROOT)
