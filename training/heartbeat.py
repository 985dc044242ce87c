"""The training step heartbeat that training.guard's watchdog reads: every flavour calls
`beat(step)` after each optimizer step; a user's own script may too.

    from training import heartbeat
    heartbeat.beat(global_step)

It writes the step number to the file the guard names in AZDL_PROGRESS_FILE, at most once a
second, and does nothing when the variable is unset (no guard, or no --progress-timeout). Under a
launcher that starts several workers below one guard (torchrun), they share the file: the guard
sees the newest step of any of them.
"""

import os
import time
from pathlib import Path

ENV = "AZDL_PROGRESS_FILE"
MIN_INTERVAL_S = 1.0
_last = 0.0


def beat(step: int) -> None:
    """Record that training made step `step` (cheap: a small write at most once a second)."""
    global _last
    path = os.environ.get(ENV)
    now = time.monotonic()
    if not path or now - _last < MIN_INTERVAL_S:
        return
    _last = now
    tmp = f"{path}.{os.getpid()}.tmp"
    Path(tmp).write_text(str(step))
    os.replace(tmp, path)


def read(path: Path) -> tuple[int, float] | None:
    """(last step, seconds since it was written), or None before the first beat."""
    try:
        text, written = path.read_text(), path.stat().st_mtime
    except FileNotFoundError:
        return None
    return int(text or 0), max(0.0, time.time() - written)
