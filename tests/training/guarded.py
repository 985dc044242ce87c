"""A script run as rank 1 under training.guard, as a test runs it."""

import os
import signal
import subprocess
import sys
import time

from azdl.envs import PACKAGES_ROOT


def run_guarded(tmp_path, code: str, *options: str, signal_after: float | None = None):
    """`python -c code` under the guard as rank 1; optionally SIGTERM the guard after a while
    (what mpirun does when another rank ends the job). Returns (run, seconds it took)."""
    script = tmp_path / "rank.py"
    script.write_text(code)
    argv = [sys.executable, "-m", "training.guard", "--ranks-dir", str(tmp_path / "ranks"),
            *options, "--", sys.executable, str(script)]  # fmt: skip
    env = os.environ | {"OMPI_COMM_WORLD_RANK": "1", "PYTHONPATH": str(PACKAGES_ROOT)}
    started = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    if signal_after is not None:
        time.sleep(signal_after)
        process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, process.returncode, out, err), (
        time.monotonic() - started
    )
