"""`azdl train`: launch N Horovod workers on this machine, in the training environment.

Gloo (`horovodrun --gloo`) is the default launcher; `--launcher mpi` uses plain `mpirun`,
the way Azure ML starts workers on a cluster, so both paths are exercised locally.
"""

import argparse
import os
import shutil
import subprocess

from azdl.envs import REPO_ROOT, training_bin, training_env
from azdl.errors import AzdlError

FRAMEWORK_MODULES = {
    "keras": "training.train_keras",
    "tf": "training.train_tf",
    "torch": "training.train_torch",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="run Horovod training locally with N worker processes",
        description="Launch N Horovod workers on this machine. Arguments after `--` go to the "
        "training script (see `azdl train --framework keras -- --help`).",
    )
    p.add_argument("--framework", choices=sorted(FRAMEWORK_MODULES), default="keras")
    p.add_argument("--workers", type=int, default=2, help="number of worker processes (default 2)")
    p.add_argument(
        "--launcher",
        choices=["gloo", "mpi"],
        default="gloo",
        help="gloo: horovodrun --gloo (default); mpi: plain mpirun, as Azure ML launches jobs",
    )
    p.add_argument(
        "script_args", nargs=argparse.REMAINDER, help="arguments for the training script"
    )
    p.set_defaults(func=run)


def launch_command(
    framework: str, workers: int, launcher: str, script_args: list[str]
) -> list[str]:
    """The command line that starts `workers` processes of the framework's training script."""
    if workers < 1:
        raise AzdlError(f"--workers must be at least 1, got {workers}")
    worker = [str(training_bin("python")), "-m", FRAMEWORK_MODULES[framework], *script_args]
    if launcher == "gloo":
        hosts = f"localhost:{workers}"
        return [
            str(training_bin("horovodrun")),
            "--gloo",
            "-np",
            str(workers),
            "-H",
            hosts,
            *worker,
        ]
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise AzdlError("--launcher mpi needs Open MPI's mpirun (make setup-training installs it)")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [
        mpirun, *root, "-np", str(workers), "--bind-to", "none", "--map-by", "slot",
        "-x", "PYTHONPATH", "-x", "PATH", *worker,
    ]  # fmt: skip


def run(args: argparse.Namespace) -> int:
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    cmd = launch_command(args.framework, args.workers, args.launcher, script_args)
    return subprocess.call(cmd, env=training_env(), cwd=REPO_ROOT)
