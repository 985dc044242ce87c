"""What `azdl jobs watch` shows, for Azure ML Studio to chart: at each epoch's end rank 0 adds
these to the epoch's MLflow metrics (training.epoch_log, through training.metrics, which never
fails the run):

    live.eta_s               the epochs left, at this epoch's wall time
    live.cost_usd            the job's nodes' rate (AZDL_USD_PER_HOUR, which `azdl submit` sets
                             from the price table) times this process's time so far
    live.cost_usd_projected  live.cost_usd and the rate times live.eta_s
    live.goodput_percent     this process's time so far spent stepping: from its first step, less
                             the checkpoint stalls (training.events)

They are this process's, from its start (psutil): Azure bills an attempt from its own start,
before the image pull and the health gate; a torchrun restart or a retry is a new process; and
the steps a resumed process does again are known only beside the attempt before it. The job's
figures, every attempt in, are `azdl jobs watch`'s and `azdl jobs ledger`'s (docs/jobs.md).
"""

import math
import os
import sys

from training import events

RATE_ENV = "AZDL_USD_PER_HOUR"
_warned: set[str] = set()


def figures(epochs_left: int, epoch_s: float, ran_ms: int, stepping_ms: int | None,
            usd_per_hour: float | None) -> dict[str, float]:  # fmt: skip
    """The live metrics of a process that has run `ran_ms` and stepped `stepping_ms` of it
    (None: no events kept), with `epochs_left` epochs to go at `epoch_s` each."""
    eta = max(epochs_left, 0) * epoch_s
    found = {"live.eta_s": eta}
    if usd_per_hour is not None:
        cost = usd_per_hour * ran_ms / 3_600_000
        found["live.cost_usd"] = cost
        found["live.cost_usd_projected"] = cost + usd_per_hour * eta / 3600
    if stepping_ms is not None and ran_ms > 0:
        found["live.goodput_percent"] = 100 * min(max(stepping_ms, 0), ran_ms) / ran_ms
    return found


def rate() -> float | None:
    """AZDL_USD_PER_HOUR, or None where it is unset or not a price (said once: the run goes on)."""
    text = os.environ.get(RATE_ENV)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value >= 0:
        return value
    if text not in _warned:
        _warned.add(text)
        print(f"live: {RATE_ENV}={text!r} is not USD per hour (a number, 0 or more); "
              "no live.cost_usd", file=sys.stderr)  # fmt: skip
    return None


def now(epochs_left: int, epoch_s: float, at_ms: int | None = None) -> dict[str, float]:
    """This process's live metrics at `at_ms` (epoch milliseconds; None: now). Its start is
    psutil's, to about a second (Linux: the boot time in whole seconds, plus the ticks since)."""
    import psutil  # here: the operator reads RATE_ENV without the training environment

    at = events.now_ms() if at_ms is None else at_ms
    ran_ms = at - round(psutil.Process().create_time() * 1000)
    log = events.log()
    stepping = None
    if log is not None and log.first_step_ms is not None:
        stepping = at - log.first_step_ms - log.checkpoint_ms
    return figures(epochs_left, epoch_s, ran_ms, stepping, rate())
