"""`azdl jobs watch`: a job and its retries followed until the latest attempt ends. Each poll
reads the jobs (azure-ai-ml's Job objects) and their events (azdl.jobs.ledger_job: from the
outputs container, as a running job writes them), and makes a Snapshot: the step, the pace
(azdl.pace), the ETA, the cost so far (the ledger's billed total: from each attempt's start,
queueing left out) and projected, the `--max-cost` state, and the goodput so far (the running
attempt counted as running, not failed). Against the measured pace: the images/s `azdl
estimate` predicted for the job's cluster, which `azdl submit` tags on a built-in flavour's job
(azdl.estimate.job_tags), and the ETA at it. And the ranks the flavour named stragglers in the
latest attempt's last epoch (azdl.epochs: rank 0 gathers every rank's compute time at each
epoch's end)."""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from azdl import ledger
from azdl.epochs import epochs, stragglers_text
from azdl.errors import AzdlError
from azdl.estimate.job_tags import BASIS_TAG, IMAGES_TAG
from azdl.jobs import budget, ledger_job
from azdl.jobs.script_job import SCRIPT_TAG
from azdl.pace import paces

NO_ESTIMATE = "no estimate on this job"


@dataclass(frozen=True)
class Snapshot:
    name: str  # the latest attempt
    status: str
    attempts: int
    step: int | None  # the latest attempt's
    images_per_s: float | None
    steps_per_s: float | None
    eta_s: float | None  # None: no --steps, or no pace yet
    predicted_images_per_s: float | None  # `azdl estimate`'s figure tagged on the job
    estimate_basis: str  # where that figure comes from, or why there is none
    eta_estimate_s: float | None  # the ETA at the predicted images/s
    cost_usd: float | None  # None: unpriced
    projected_usd: float | None
    projected_basis: str  # "at the ETA", "to the time limit"
    max_cost: str  # the --max-cost state, in words
    goodput_percent: float | None
    stragglers: str  # the latest attempt's last epoch's, in words (azdl.epochs)
    book: ledger.Ledger
    gpus: int
    price: Fraction | None  # USD per node-hour

    @property
    def ended(self) -> bool:
        from azdl.jobs.workspace import TERMINAL

        return self.status in TERMINAL


def snapshot(jobs: list, outputs, now: datetime, total_steps: int | None) -> Snapshot:
    """The figures of `jobs`, a job and its retries in order, at `now`."""
    found = ledger_job.chain_events(jobs, outputs)
    book, gpus, price = ledger_job.chain_ledger(jobs, outputs, now, found)
    latest = jobs[-1]
    status = getattr(latest.status, "value", latest.status)
    timeout = latest.limits.timeout if latest.limits is not None else None
    return figures(found, book, gpus, price, latest.name, status, total_steps,
                   estimate_of(latest.tags or {}), (latest.tags or {}).get(budget.MAX_COST_TAG),
                   timeout)  # fmt: skip


def local_snapshot(events_dir, total_steps: int | None) -> Snapshot:
    """The figures of a local run (`azdl train`'s events folder) now: one node, unpriced."""
    from azdl import local_ledger
    from training import events

    found = events.read(events_dir)
    rows = local_ledger.timeline(events_dir, ledger.now_ms(), found)
    book = ledger.ledger([attempt for attempt, _ in rows], found)
    latest, status = rows[-1]
    return figures(found, book, 0, None, latest.name, status, total_steps,
                   (None, f"{NO_ESTIMATE}: a local run"), None, None)  # fmt: skip


def figures(found: list[dict], book: ledger.Ledger, gpus: int, price: Fraction | None,
            name: str, status: str, total_steps: int | None,
            estimate: tuple[float | None, str], cap: str | None, timeout_s: float | None
            ) -> Snapshot:  # fmt: skip
    """The Snapshot of the latest attempt `name` (in `status`) of the chain `book` holds, from
    its events `found`; `cap`: the job's --max-cost tag, if any."""
    from azdl.jobs.workspace import TERMINAL  # here: it loads the Azure side

    doc = ledger.document(book, gpus, price)
    mine = [p for p in paces(found) if p.attempt == name]
    pace = mine[-1] if mine else None
    step = ledger.last_step([e for e in found if e["attempt"] == name])
    ended = status in TERMINAL
    eta = eta_estimate = None
    predicted, estimate_basis = estimate
    if not ended and pace and total_steps is not None and step is not None:
        eta = max(total_steps - step, 0) / pace.steps_per_s
        if predicted is not None:  # at the measured samples per step
            samples_left = max(total_steps - step, 0) * pace.samples_per_s / pace.steps_per_s
            eta_estimate = samples_left / predicted
    cost = doc["billed"]["usd"]
    nodes = book.attempts[-1].nodes
    hourly = None if price is None else float(price) * nodes
    projected, basis = None, "unknown"
    if ended:
        projected, basis = cost, "(ended)"
    elif hourly is not None and eta is not None:
        projected, basis = cost + eta / 3600 * hourly, "at the ETA"
    elif hourly is not None and timeout_s:
        ran = (book.attempts[-1].end_ms - book.attempts[-1].start_ms) / 1000
        left = max(timeout_s - ran, 0)
        projected, basis = cost + left / 3600 * hourly, "to the time limit"
    return Snapshot(
        name, status, len(book.attempts), step,
        pace.samples_per_s if pace else None, pace.steps_per_s if pace else None, eta,
        predicted, estimate_basis, eta_estimate, cost,
        None if projected is None else round(projected, 2), basis, max_cost_state(cap, cost),
        doc["goodput_percent"],
        stragglers_text([x for x in epochs(found) if x.attempt == name]), book, gpus, price,
    )  # fmt: skip


def estimate_of(tags: dict) -> tuple[float | None, str]:
    """(the images/s `azdl submit` tagged as `azdl estimate`'s prediction, its basis), or (None,
    why the job has none)."""
    if IMAGES_TAG in tags:
        text = tags[IMAGES_TAG]
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise AzdlError(f"tag {IMAGES_TAG} {text!r} on the job: expected images/s above 0")
        return value, tags.get(BASIS_TAG, f"no {BASIS_TAG} tag")
    if SCRIPT_TAG in tags:
        why = "a user's script (azdl estimate prices the built-in flavours' models only)"
    elif "azdl.framework" not in tags:  # the tag `azdl submit` sets on every training job
        why = "not a training job of `azdl submit`"
    else:
        why = (f"no {IMAGES_TAG} tag: submitted by an azdl older than it, or a model, size "
               "and node count `azdl estimate` has no figure for")  # fmt: skip
    return None, f"{NO_ESTIMATE}: {why}"


def max_cost_state(cap: str | None, cost: float | None) -> str:
    if cap is None:
        return "no --max-cost"
    if cost is None:
        return f"--max-cost {cap} USD; spent unknown (unpriced)"
    return f"--max-cost {cap} USD: {cost:.2f} spent ({cost / float(cap) * 100:.0f}%)"


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else str(timedelta(seconds=round(seconds)))


def fields(snap: Snapshot) -> list[tuple[str, str]]:
    """One poll's figures as (name, value) pairs: the live table's rows, the plain line's parts."""
    eta = _minutes(snap.eta_s)
    if snap.eta_s is None:
        eta = "- (" + ("ended" if snap.ended else "no step batch yet" if snap.steps_per_s is None
                       else "pass --steps") + ")"  # fmt: skip
    elif snap.predicted_images_per_s is not None:
        eta += f" at the measured pace, {_minutes(snap.eta_estimate_s)} at the estimate"
    estimate = f"- ({snap.estimate_basis})"
    if snap.predicted_images_per_s is not None:
        ratio = "-" if snap.images_per_s is None else (
            f"{snap.images_per_s / snap.predicted_images_per_s:.2f}")  # fmt: skip
        estimate = (f"{snap.predicted_images_per_s:.1f} images/s, measured/predicted {ratio} "
                    f"({snap.estimate_basis})")  # fmt: skip
    projected = "-" if snap.projected_usd is None else f"{snap.projected_usd:.2f}"
    return [
        ("job", f"{snap.name} {snap.status} (attempt {snap.attempts})"),
        ("step", "-" if snap.step is None else str(snap.step)),
        ("images/s", "-" if snap.images_per_s is None else f"{snap.images_per_s:.1f}"),
        ("estimate", estimate),
        ("ETA", eta),
        ("cost USD", "-" if snap.cost_usd is None else f"{snap.cost_usd:.2f}"),
        ("projected USD", f"{projected} {snap.projected_basis}"),
        ("budget", snap.max_cost),
        ("goodput", "-" if snap.goodput_percent is None else f"{snap.goodput_percent:.1f}%"),
        ("stragglers", snap.stragglers),
    ]


def line(snap: Snapshot) -> str:
    """One poll as one plain line (stdout not a terminal)."""
    return "; ".join(f"{name} {value}" for name, value in fields(snap))


def now() -> datetime:
    return datetime.now(UTC)


# How `follow` waits and reads the time (tests put a fake clock here).
SLEEP, NOW = time.sleep, now


def follow(poll: Callable[[], Snapshot], every: float, show: Callable[[Snapshot], None]
           ) -> Snapshot:  # fmt: skip
    """Poll every `every` seconds, handing each Snapshot to `show`, until the latest attempt
    ends; return the last one."""
    while True:
        snap = poll()
        show(snap)
        if snap.ended:
            return snap
        SLEEP(every)
