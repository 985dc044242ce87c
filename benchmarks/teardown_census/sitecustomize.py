"""On PYTHONPATH for benchmarks/teardown_stress.py only: each torchrun worker (RANK set) writes,
at exit, which torch.distributed threads are still alive, to AZDL_CENSUS_DIR/rank-<R> (a file
of its own: two workers' lines on one stdout can merge). training/teardown.py is loaded by path
from AZDL_TEARDOWN_PY, so that a checkout without it can be measured too. Python runs atexit
handlers last-registered first, and before the interpreter starts to finalize: this one,
registered at start-up, runs after the script's own."""

import atexit
import importlib.util
import os
from pathlib import Path


def _census() -> None:
    spec = importlib.util.spec_from_file_location("azdl_teardown", os.environ["AZDL_TEARDOWN_PY"])
    teardown = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(teardown)
    path = Path(os.environ["AZDL_CENSUS_DIR"]) / f"rank-{os.environ['RANK']}"
    path.write_text(",".join(teardown.c10d_threads()) or "-")


if {"RANK", "AZDL_TEARDOWN_PY", "AZDL_CENSUS_DIR"} <= os.environ.keys():
    atexit.register(_census)
