"""Training's epochs from its events (training.events.epoch): each epoch's metrics, for `azdl
jobs report` (the loss curve), and the ranks its flavour named stragglers, for `azdl jobs
watch`."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Epoch:
    attempt: str
    t_ms: int  # when it ended
    number: int  # 1-based
    values: dict[str, float]  # loss and the rest, as the flavour logged them
    stragglers: list[dict] | None  # {rank, host, ratio}; [] none; None: not timed


def epochs(events: list[dict]) -> list[Epoch]:
    """The epochs of `events`, in time order."""
    return [
        Epoch(e["attempt"], e["t_ms"], e["epoch"], e.get("values") or {}, e.get("stragglers"))
        for e in sorted(events, key=lambda e: e["t_ms"])
        if e["event"] == "epoch"
    ]


def stragglers_text(found: list[Epoch]) -> str:
    """The last epoch's stragglers, in words."""
    if not found:
        return "- (no epoch has ended yet)"
    last = found[-1]
    if last.stragglers is None:
        return f"- (epoch {last.number}: no rank timed, or not by this flavour)"
    if not last.stragglers:
        return f"none in epoch {last.number}"
    named = "; ".join(f"rank {s['rank']} on {s['host']} at {s['ratio']:.2f}x the median rank"
                      for s in last.stragglers)  # fmt: skip
    return f"epoch {last.number}: {named}"
