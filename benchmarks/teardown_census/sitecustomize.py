"""On PYTHONPATH for benchmarks/teardown_stress.py only: each torchrun worker (RANK set) writes
which torch.distributed threads are alive when its `destroy_process_group()` returns, to
AZDL_CENSUS_DIR/rank-<R> (a file of its own: two workers' lines on one stdout can merge). A
thread alive then means something else still holds the group, which is then destroyed later,
where it can abort or hang (training/teardown.py). A worker that never calls it writes
"never called" at exit. training/teardown.py is loaded by path from AZDL_TEARDOWN_PY, so that a
checkout without it can be measured too."""

import atexit
import importlib.util
import os
from pathlib import Path


def _threads() -> str:
    spec = importlib.util.spec_from_file_location("azdl_teardown", os.environ["AZDL_TEARDOWN_PY"])
    teardown = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(teardown)
    return ",".join(teardown.c10d_threads()) or "-"


def _write(text: str) -> None:
    path = Path(os.environ["AZDL_CENSUS_DIR"]) / f"rank-{os.environ['RANK']}"
    if not path.exists():
        path.write_text(text)


def _watch_destroy() -> None:
    import torch.distributed as dist

    destroy = dist.destroy_process_group

    def destroy_and_count(*args, **kwargs):
        destroy(*args, **kwargs)
        _write(_threads())

    dist.destroy_process_group = destroy_and_count


if {"RANK", "AZDL_TEARDOWN_PY", "AZDL_CENSUS_DIR"} <= os.environ.keys():
    _watch_destroy()
    atexit.register(_write, "never called")
