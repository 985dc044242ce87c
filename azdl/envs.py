"""Locate the training environment and run commands in it.

The operator tools (this package, Pulumi, Azure SDKs) and the training code (TensorFlow 2.15,
PyTorch, Horovod) live in separate virtual environments because their protobuf majors
conflict. Work that needs the training stack is dispatched to `.venv-train` from here, so a
user never activates an environment by hand.
"""

import os
import subprocess
from pathlib import Path

from azdl import project
from azdl.errors import AzdlError

# The folder that holds azdl's packages (azdl, infra, training, policies, images): a checkout's
# root, or the site-packages the wheel is installed into. The user's project: azdl.project.
PACKAGES_ROOT = Path(__file__).resolve().parent.parent
CHECKOUT = (PACKAGES_ROOT / "pyproject.toml").is_file()  # not an installed wheel
VENV_NAME = ".venv-train"
# The script both make it with: `make setup-training` here, `azdl setup-training` in a project.
SETUP_SCRIPT = PACKAGES_ROOT / "training" / "install" / "setup-training.sh"
# In the training environment: a link to azdl's `training` package alone (the script makes it).
RUNTIME_LINKS = "azdl-runtime"
# TensorFlow's C++ start-up lines (oneDNN, CPU features) are INFO, level 0; 1 drops INFO and
# keeps warnings and errors. AZDL_VERBOSE=1 keeps TensorFlow's own default; a value the user
# set wins either way. scripts/setup-training.sh does the same for the Horovod build check.
VERBOSE_ENV = "AZDL_VERBOSE"
TF_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
QUIET_TF_LOG_LEVEL = "1"


def project_venv() -> Path:
    """Where `azdl setup-training` makes the project's training environment."""
    return project.root() / VENV_NAME


def training_venv() -> Path:
    """The project's training environment (`azdl setup-training`); in a checkout without one
    there, the checkout's own (`make setup-training`)."""
    try:
        mine = project_venv()
    except AzdlError:  # no project: an installed azdl has no environment of its own
        if not CHECKOUT:
            raise
        return PACKAGES_ROOT / VENV_NAME
    return PACKAGES_ROOT / VENV_NAME if CHECKOUT and not mine.is_dir() else mine


def training_bin(name: str) -> Path:
    """Path of an executable in the training environment, or a clear error if it isn't set up."""
    path = training_venv() / "bin" / name
    if not path.exists():
        how = "make setup-training" if CHECKOUT else "azdl setup-training"
        raise AzdlError(
            f"the training environment has no {name!r} ({path}); create it with `{how}`"
        )
    return path


def work_dir() -> Path:
    """Where local workers start, and what a relative --data-dir is read from: the project."""
    return project.root()


def training_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for processes in the training venv: azdl's packages are importable, and
    TensorFlow's C++ start-up lines are quiet unless AZDL_VERBOSE=1."""
    env = dict(os.environ)
    if env.get(VERBOSE_ENV) != "1":
        env.setdefault(TF_LOG_LEVEL_ENV, QUIET_TF_LOG_LEVEL)
    # An installed azdl's site-packages holds the operator's packages too: only its link.
    runtime = PACKAGES_ROOT if CHECKOUT else training_venv() / RUNTIME_LINKS
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(runtime), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(training_venv() / "bin"), env.get("PATH", "")])
    env.update(extra or {})
    return env


def run_training_module(module: str, args: list[str]) -> int:
    """Run `python -m module args…` in the training environment, in the current folder (the
    user's paths as typed); return its exit code."""
    cmd = [str(training_bin("python")), "-m", module, *args]
    return subprocess.call(cmd, env=training_env())


def setup_training() -> int:
    """Create or update the project's training environment (SETUP_SCRIPT); its exit code."""
    return subprocess.call(["bash", str(SETUP_SCRIPT), str(project_venv())])
