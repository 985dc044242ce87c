"""The options (VM size × node count × priority), their time and cost, the time/cost frontier
and the recommendation. The cost and eviction model: docs/estimate.md ("Cost")."""

import math
from dataclasses import dataclass

from azdl.estimate.throughput import Inputs, Rate, throughput
from azdl.estimate.workload import Workload
from azdl.review.prices import Prices
from infra.catalogue import VmSize

DEDICATED, LOW_PRIORITY = "Dedicated", "LowPriority"  # Azure's spelling (infra/config/compute.py)
# Assumptions for low-priority nodes: Azure publishes no eviction rate for them.
DEFAULT_EVICTION_RATE = 0.05  # evictions per node-hour
DEFAULT_RESTART_MINUTES = 10.0  # requeue, node allocation, image pull, resume from a checkpoint


@dataclass(frozen=True)
class Settings:
    workload: Workload
    prices: Prices
    max_nodes: int
    fixed_hourly: float = 0.0  # the stack's own cost per hour (NAT, endpoints, share, ...)
    max_gpu_spend_per_hour: float | None = None
    eviction_rate: float = DEFAULT_EVICTION_RATE
    restart_minutes: float = DEFAULT_RESTART_MINUTES
    checkpoint_hours: float | None = None  # None: one epoch (the jobs checkpoint every epoch)
    priorities: tuple[str, ...] = (DEDICATED, LOW_PRIORITY)


@dataclass
class Option:
    vm_size: str
    nodes: int
    priority: str
    gpus: int
    cores: int
    rate: Rate
    node_price: float | None = None
    price_note: str = ""
    train_hours: float | None = None  # at the rate, without evictions
    eviction_hours: float = 0.0
    cost_usd: float | None = None
    excluded: str | None = None  # why the option cannot be recommended
    frontier: bool = False

    @property
    def hours(self) -> float | None:
        return None if self.train_hours is None else self.train_hours + self.eviction_hours

    @property
    def eligible(self) -> bool:
        return self.excluded is None

    def as_dict(self) -> dict:
        return {
            "vmSize": self.vm_size,
            "nodes": self.nodes,
            "priority": self.priority,
            "gpus": self.gpus,
            "coresNeeded": self.cores,
            "imagesPerSec": self.rate.images_per_sec,
            "throughputSource": self.rate.source,
            "throughputSummary": self.rate.short,
            "throughputKind": self.rate.kind,
            "nodePriceUsdPerHour": self.node_price,
            "priceNote": self.price_note,
            "trainHours": self.train_hours,
            "evictionHours": self.eviction_hours,
            "hours": self.hours,
            "costUsd": self.cost_usd,
            "excluded": self.excluded,
            "frontier": self.frontier,
        }


def node_price(prices: Prices, size: str, priority: str) -> tuple[float | None, str]:
    """The hourly price of one node and a note on it (Prices.node_hourly)."""
    return prices.node_hourly(size, low_priority=priority != DEDICATED)


def evaluate(size: VmSize, nodes: int, priority: str, s: Settings, inputs: Inputs) -> Option:
    rate = throughput(size, nodes, s.workload.model, inputs)
    option = Option(size.name, nodes, priority, nodes * size.gpus, nodes * size.vcpus, rate)
    if rate.images_per_sec is None:
        option.excluded = rate.source
        return option
    option.train_hours = s.workload.total_images / rate.images_per_sec / 3600
    option.node_price, option.price_note = node_price(s.prices, size.name, priority)
    if priority == LOW_PRIORITY:
        epoch_hours = s.workload.images / rate.images_per_sec / 3600
        interval = s.checkpoint_hours if s.checkpoint_hours is not None else epoch_hours
        lost = nodes * s.eviction_rate * (interval / 2 + s.restart_minutes / 60)
        if lost >= 1:
            option.excluded = (
                f"evictions ({s.eviction_rate:g}/node-hour on {nodes} nodes) come faster than "
                f"checkpoints every {interval:.2f} h can keep up with"
            )
            return option
        option.eviction_hours = option.train_hours * (1 / (1 - lost) - 1)
    if option.node_price is None:
        option.excluded = option.price_note
        return option
    gpu_spend = nodes * option.node_price
    option.cost_usd = option.hours * (gpu_spend + s.fixed_hourly)
    if s.max_gpu_spend_per_hour is not None and gpu_spend > s.max_gpu_spend_per_hour:
        option.excluded = (
            f"{nodes} × {option.node_price:g} = {gpu_spend:,.2f} USD/h is above "
            f"maxGpuSpendPerHourUsd ({s.max_gpu_spend_per_hour:g})"
        )
    return option


def options(sizes: list[VmSize], s: Settings, inputs: Inputs) -> list[Option]:
    out = [
        evaluate(size, nodes, priority, s, inputs)
        for size in sizes
        for nodes in range(1, s.max_nodes + 1)
        for priority in s.priorities
    ]
    mark_frontier(out)
    return out


def mark_frontier(opts: list[Option]) -> None:
    """Eligible options no other eligible option beats on both time and cost."""
    eligible = sorted((o for o in opts if o.eligible), key=lambda o: (o.hours, o.cost_usd))
    best_cost = math.inf
    for option in eligible:
        option.frontier = option.cost_usd < best_cost
        best_cost = min(best_cost, option.cost_usd)


def recommend(opts: list[Option], deadline: float | None, budget: float | None) -> Option | None:
    """The cheapest option that meets the deadline (and the budget, if one is given), or with a
    budget only the fastest within it; None when nothing qualifies or no target is given.
    Among options that cost the same to the cent, the one with the fewest nodes."""
    fits = [
        o
        for o in opts
        if o.eligible
        and (deadline is None or o.hours <= deadline)
        and (budget is None or o.cost_usd <= budget)
    ]
    if not fits or (deadline is None and budget is None):
        return None
    if (
        deadline is not None
    ):  # costs equal to the cent: the fewest nodes (less quota, fewer evictions)
        return min(fits, key=lambda o: (round(o.cost_usd, 2), o.nodes, o.hours))
    return min(fits, key=lambda o: (o.hours, o.cost_usd))


def nearest(
    opts: list[Option],
    deadline: float | None,
    budget: float | None,
    more_nodes: list[Option],
    max_nodes: int,
) -> list[str]:
    """What the target would need when no option meets it: a longer deadline, a larger budget,
    more nodes than `max_nodes` (from `more_nodes`, options evaluated past it) or a higher
    spend limit."""
    eligible = [o for o in opts if o.eligible]
    needs: list[str] = []
    if not eligible:
        return ["no option could be timed and priced: see the `excluded` lines below"]
    if deadline is not None:
        fastest = min(eligible, key=lambda o: (o.hours, o.cost_usd))
        if fastest.hours > deadline:
            needs.append(
                f"the fastest option, {describe(fastest)}, takes {fastest.hours:.1f} h: it needs "
                f"a deadline of at least {math.ceil(fastest.hours * 10) / 10:g} h"
            )
            bigger = [o for o in more_nodes if o.eligible and o.hours <= deadline]
            if bigger:
                first = min(bigger, key=lambda o: (o.nodes, o.cost_usd))
                needs.append(
                    f"or a larger maxNodes: {describe(first)} meets {deadline:g} h in "
                    f"{first.hours:.1f} h for {first.cost_usd:,.0f} USD (maxNodes is {max_nodes})"
                )
            spend = [
                o for o in opts if o.hours is not None and o.cost_usd is not None
                and "maxGpuSpendPerHourUsd" in (o.excluded or "") and o.hours <= deadline
            ]  # fmt: skip
            if spend:
                first = min(spend, key=lambda o: o.cost_usd)
                needs.append(f"or a higher maxGpuSpendPerHourUsd: {describe(first)} meets it but "
                             f"{first.excluded}")  # fmt: skip
        elif budget is not None:
            meeting = [o for o in eligible if o.hours <= deadline]
            cheapest = min(meeting, key=lambda o: o.cost_usd)
            needs.append(
                f"the cheapest option that meets {deadline:g} h, {describe(cheapest)}, costs "
                f"{cheapest.cost_usd:,.0f} USD: it needs a budget of at least "
                f"{math.ceil(cheapest.cost_usd):,} USD"
            )
    if budget is not None and deadline is None:
        cheapest = min(eligible, key=lambda o: (o.cost_usd, o.hours))
        needs.append(
            f"the cheapest option, {describe(cheapest)}, costs {cheapest.cost_usd:,.0f} USD: it "
            f"needs a budget of at least {math.ceil(cheapest.cost_usd):,} USD"
        )
    return needs


def describe(o: Option) -> str:
    priority = "low-priority" if o.priority == LOW_PRIORITY else "dedicated"
    return f"{o.nodes} × {o.vm_size} ({priority})"
