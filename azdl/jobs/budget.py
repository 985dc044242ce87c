"""What a job may cost and has cost: `azdl submit --max-cost USD` turned into the job's time
limit, the time limit every cluster job gets without one, and a job's cost so far for
`azdl jobs show|list`. Nodes are priced by the table `azdl plan` and `azdl estimate` read
(azdl.review.prices, the stack's region) at the dedicated price: an upper bound for low-priority
nodes, so a cap computed from it is never exceeded. No Azure calls."""

import math
from dataclasses import dataclass

from azdl.errors import AzdlError

# Azure ML's `limits.timeout` for a job given neither --timeout nor --max-cost (docs/jobs.md,
# "Time limits and budgets"). Azure ML cancels the job after it.
DEFAULT_TIMEOUT_S = 24 * 3600
# The smallest time limit a budget may buy: less would end the job before its image is pulled.
MIN_TIMEOUT_S = 300
# On each job: the cap asked for and what its nodes cost per hour (`azdl jobs show|list`).
MAX_COST_TAG, RATE_TAG = "azdl.max_cost_usd", "azdl.usd_per_hour"


@dataclass(frozen=True)
class TimeLimit:
    seconds: int
    why: str  # where the limit comes from, for the dry run and messages


def hourly_rate(outputs, nodes: int) -> tuple[float | None, str]:
    """(USD per hour of `nodes` nodes of the stack's size, or None: unpriced; a note)."""
    from azdl.review.prices import load_prices

    prices = load_prices(region=outputs.values.get("location"))
    node, note = prices.node_hourly(outputs.vm_size.name)
    if node is None:
        return None, note
    return nodes * node, f"{nodes} x {node:g} USD/h ({outputs.vm_size.name}; {prices.label})"


def time_limit(outputs, nodes: int, timeout: int | None = None,
               max_cost: float | None = None, spent_usd: float = 0.0) -> TimeLimit:  # fmt: skip
    """The job's time limit: the time `max_cost` (less `spent_usd`, what earlier attempts of the
    same job cost) buys on its nodes, `timeout`, the smaller of the two when both are given, or
    DEFAULT_TIMEOUT_S."""
    limits = []
    if timeout is not None:
        limits.append(TimeLimit(timeout, f"--timeout {timeout}"))
    if max_cost is not None:
        if max_cost <= 0:
            raise AzdlError(f"--max-cost {max_cost:g}: expected an amount in USD above 0")
        rate, note = hourly_rate(outputs, nodes)
        if rate is None:
            raise AzdlError(
                f"--max-cost needs the nodes' price, and {note}; pass --timeout instead, or add "
                "the price to the table (azdl/review/prices.yaml)"
            )
        left = max_cost - spent_usd
        seconds = math.floor(left / rate * 3600 + 1e-6) if left > 0 else 0  # float noise
        if seconds < MIN_TIMEOUT_S:
            spent = f" ({spent_usd:.2f} USD spent by earlier attempts)" if spent_usd else ""
            raise AzdlError(
                f"--max-cost {max_cost:g} USD{spent} buys {max(seconds, 0)} s of {note}: less "
                f"than the {MIN_TIMEOUT_S} s a job needs to start; raise it"
            )
        limits.append(TimeLimit(seconds, f"--max-cost {max_cost:g} USD at {note}"))
    if not limits:
        return TimeLimit(DEFAULT_TIMEOUT_S, f"the default of {DEFAULT_TIMEOUT_S // 3600} h")
    return min(limits, key=lambda limit: limit.seconds)


def cost_so_far(hours: float, usd_per_hour: float | None) -> float | None:
    return None if usd_per_hour is None else hours * usd_per_hour


@dataclass(frozen=True)
class JobCost:
    hours: float | None  # since the job was created (queueing included), None: no times
    usd_per_hour: float | None  # None: unpriced
    note: str  # where the rate comes from, or why there is none

    @property
    def usd(self) -> float | None:
        if self.hours is None:
            return None
        return cost_so_far(self.hours, self.usd_per_hour)


def job_cost(job, outputs, now) -> JobCost:
    """What an azure-ai-ml Job has cost so far: its nodes' hourly rate (the RATE_TAG `azdl
    submit` sets from the price table; for a job without it, the stack's price for its instance
    count) times the hours from its creation to its last change once it ended, or to `now`
    while it runs. Azure ML's job resource has no start time (its systemData holds createdAt and
    lastModifiedAt), so queueing counts: an upper bound."""
    from azdl.jobs.workspace import TERMINAL

    tags = job.tags or {}
    count = getattr(getattr(job, "resources", None), "instance_count", None)
    if RATE_TAG in tags:
        rate, note = float(tags[RATE_TAG]), f"{tags[RATE_TAG]} USD/h (tag {RATE_TAG})"
    elif count:
        rate, note = hourly_rate(outputs, count)
    else:
        rate, note = None, "the job names no node count"
    context = getattr(job, "creation_context", None)
    created = getattr(context, "created_at", None)
    end = getattr(context, "last_modified_at", None) if job.status in TERMINAL else now
    if created is None or end is None:
        return JobCost(None, rate, note)
    return JobCost(max(0.0, (end - created).total_seconds() / 3600), rate, note)
