"""A torchrun run that finished exits 0 (training/teardown.py): the abort at exit made certain
by a user's script whose process group outlives it, and named by `azdl train` in one line; and
two-worker runs of the built-in flavour and the example under CPU load, as CI's short version of
benchmarks/teardown_stress.py, none of which may leave a torch.distributed thread alive."""

import importlib.util
import os
import subprocess
import sys

import pytest

from azdl.envs import PACKAGES_ROOT
from training.teardown import TEARDOWN_ABORT

pytestmark = pytest.mark.slow
SCRIPT = PACKAGES_ROOT / "tests" / "training" / "teardown_script.py"


def azdl_train(*args: str) -> subprocess.CompletedProcess:
    """`azdl train` as a user runs it (the operator environment), this checkout's code."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {
        "PYTHONPATH": str(PACKAGES_ROOT)
    }
    return subprocess.run(
        [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", "train", *args],
        cwd=PACKAGES_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_group_that_outlives_the_script_aborts_at_exit_and_azdl_says_so_in_one_line():
    pinned = azdl_train("--launcher", "torchrun", "--script", str(SCRIPT), "--", "--pin")
    out = pinned.stdout + pinned.stderr
    assert "rank 0: script returned" in out, out
    assert TEARDOWN_ABORT in out and pinned.returncode == 134, out
    (line,) = [x for x in pinned.stderr.splitlines() if x.startswith("error:")]
    assert "worker rank 0 aborted (SIGABRT" in line and "Ending cleanly" in line, line
    assert "Traceback" not in pinned.stderr.split(TEARDOWN_ABORT)[-1], out  # torchrun's: replaced

    clean = azdl_train("--launcher", "torchrun", "--script", str(SCRIPT))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert TEARDOWN_ABORT not in clean.stdout + clean.stderr


def _stress_module():
    path = PACKAGES_ROOT / "benchmarks" / "teardown_stress.py"
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("teardown_stress", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ten_runs_under_load_end_cleanly_with_no_thread_left():
    stress = _stress_module()
    rows = stress.stress(PACKAGES_ROOT, runs=10, load=os.cpu_count() or 1, label="CI")
    for _label, kind, runs, exited_0, aborts, threads_left, missing in rows:
        assert (runs, exited_0, aborts, threads_left, missing) == (5, 5, 0, 0, 0), (kind, rows)
