"""A torchrun run that finished exits 0 (training/teardown.py): the abort at exit made certain
by a user's script whose process group outlives it, and named by `azdl train` in one line; the
hang at exit made certain by one whose DDP model outlives its group; and
two-worker runs of the built-in flavour and the example under CPU load, as CI's short version of
benchmarks/teardown_stress.py, none of which may leave a torch.distributed thread alive."""

import contextlib
import importlib.util
import os
import queue
import subprocess
import sys
import threading
import time

import psutil
import pytest

from azdl.envs import PACKAGES_ROOT
from training.teardown import TEARDOWN_ABORT

pytestmark = pytest.mark.slow
SCRIPT = PACKAGES_ROOT / "tests" / "training" / "teardown_script.py"
HANG_S = 15  # how long rank 0 must outlast rank 1 to count as hung


# `azdl train` as a user runs it (the operator environment), this checkout's code.
AZDL_TRAIN = [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", "train"]
ENV = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {
    "PYTHONPATH": str(PACKAGES_ROOT)
}


def azdl_train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*AZDL_TRAIN, *args], cwd=PACKAGES_ROOT, env=ENV, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


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


def test_a_model_that_outlives_its_group_hangs_rank_0_for_good():
    """--hold: the group destroyed while the DDP model lives dies with the model, holding the
    GIL, while a Gloo thread's callback waits for it: rank 1 returns, rank 0 never does (the
    clean run, same script and model, is the test above). Watched line by line; killed after."""
    cmd = [*AZDL_TRAIN, "--launcher", "torchrun", "--script", str(SCRIPT), "--", "--hold"]
    proc = subprocess.Popen(cmd, cwd=PACKAGES_ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    seen, deadline = [], time.monotonic() + 240
    try:
        while not any("rank 1: script returned" in x for x in seen):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(seen)
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=1))
        time.sleep(HANG_S)  # rank 0 ends within a second of rank 1 when nothing holds the GIL
        while not lines.empty():
            seen.append(lines.get())
        assert proc.poll() is None, "".join(seen)  # still running: rank 0 hangs
        assert not any("rank 0: script returned" in x for x in seen), "".join(seen)
    finally:
        if proc.poll() is None:  # hung, as it should: end azdl, torchrun and both workers
            family = psutil.Process(proc.pid).children(recursive=True)
            proc.kill()
            for process in family:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
        proc.wait(timeout=30)


def _stress_module():
    path = PACKAGES_ROOT / "benchmarks" / "teardown_stress.py"
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("teardown_stress", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _top_up() -> int:
    """Busy processes that bring the machine's load to one per core: none inside `make test`,
    whose two streams already keep every core busy (a load average of 4-5 on 2 cores), one per
    core when this file runs alone. Burning cores the other stream needs bought nothing."""
    cores = os.cpu_count() or 1
    return max(0, cores - int(os.getloadavg()[0]))


def test_ten_runs_under_load_end_cleanly_with_no_thread_left():
    stress = _stress_module()
    rows = stress.stress(PACKAGES_ROOT, runs=10, load=_top_up(), label="CI")
    for _label, kind, runs, exited_0, aborts, threads_left, missing in rows:
        assert (runs, exited_0, aborts, threads_left, missing) == (5, 5, 0, 0, 0), (kind, rows)
