"""On PYTHONPATH for benchmarks/teardown_stress.py only: in each torchrun worker (RANK set),
print at exit which torch.distributed threads are still alive (training/teardown.py, loaded by
path from AZDL_TEARDOWN_PY so that a checkout without it can be measured too). Python runs
atexit handlers last-registered first, and before the interpreter starts to finalize: this one,
registered at start-up, runs after the script's own."""

import atexit
import importlib.util
import os


def _census() -> None:
    spec = importlib.util.spec_from_file_location("azdl_teardown", os.environ["AZDL_TEARDOWN_PY"])
    teardown = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(teardown)
    alive = teardown.c10d_threads()
    print(f"azdl-census: rank {os.environ['RANK']}: {','.join(alive) or '-'}", flush=True)


if "RANK" in os.environ and "AZDL_TEARDOWN_PY" in os.environ:
    atexit.register(_census)
