"""Locate the training environment and run commands in it.

The operator tools (this package, Pulumi, Azure SDKs) and the training code (TensorFlow 2.15,
PyTorch, Horovod) live in separate virtual environments because their protobuf majors
conflict. Work that needs the training stack is dispatched to `.venv-train` from here, so a
user never activates an environment by hand.
"""

import os
import subprocess
from pathlib import Path

from azdl.errors import AzdlError

# The folder that holds azdl's packages (azdl, infra, training, policies, images): a checkout's
# root, or the site-packages the wheel is installed into. The user's project: azdl.project.
PACKAGES_ROOT = Path(__file__).resolve().parent.parent
TRAINING_VENV = PACKAGES_ROOT / ".venv-train"  # a checkout's (make setup-training)
# TensorFlow's C++ start-up lines (oneDNN, CPU features) are INFO, level 0; 1 drops INFO and
# keeps warnings and errors. AZDL_VERBOSE=1 keeps TensorFlow's own default; a value the user
# set wins either way. scripts/setup-training.sh does the same for the Horovod build check.
VERBOSE_ENV = "AZDL_VERBOSE"
TF_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
QUIET_TF_LOG_LEVEL = "1"


def training_bin(name: str) -> Path:
    """Path of an executable in the training environment, or a clear error if it isn't set up."""
    path = TRAINING_VENV / "bin" / name
    if not path.exists():
        raise AzdlError(
            f"the training environment has no {name!r} ({path}); "
            "create it with `make setup-training` (scripts/setup-training.sh)"
        )
    return path


def training_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for processes in the training venv: azdl's packages are importable, and
    TensorFlow's C++ start-up lines are quiet unless AZDL_VERBOSE=1."""
    env = dict(os.environ)
    if env.get(VERBOSE_ENV) != "1":
        env.setdefault(TF_LOG_LEVEL_ENV, QUIET_TF_LOG_LEVEL)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGES_ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(TRAINING_VENV / "bin"), env.get("PATH", "")])
    env.update(extra or {})
    return env


def run_training_module(module: str, args: list[str]) -> int:
    """Run `python -m module args…` in the training environment; return its exit code."""
    cmd = [str(training_bin("python")), "-m", module, *args]
    return subprocess.call(cmd, env=training_env(), cwd=PACKAGES_ROOT)
