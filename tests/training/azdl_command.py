"""The `azdl` command run as a user runs it, for the training tests that start it."""

import os
import subprocess
from pathlib import Path

from azdl.envs import PACKAGES_ROOT


def azdl(*args, cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    """The `azdl` command as a user runs it (the operator environment), this checkout's code."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {
        "PYTHONPATH": str(PACKAGES_ROOT)
    }
    return subprocess.run(
        [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", *map(str, args)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=timeout,
    )  # fmt: skip
