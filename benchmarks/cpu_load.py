"""Busy processes beside a measurement, as a loaded CI machine has them (one per core keeps every
core busy). Used by the benchmarks that measure behaviour under load."""

import contextlib
import multiprocessing


def _burn(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@contextlib.contextmanager
def busy(processes: int):
    """`processes` busy processes for the length of the block."""
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
               for _ in range(processes)]  # fmt: skip
    for b in burners:
        b.start()
    try:
        yield
    finally:
        stop.set()
        for b in burners:
            b.join()
