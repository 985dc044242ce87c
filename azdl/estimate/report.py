"""How an estimate is shown: the frontier table, the recommendation, the sources, a cost/time
plot and the JSON document."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from azdl.estimate.frontier import LOW_PRIORITY, Option, describe

if TYPE_CHECKING:
    from rich.table import Table

QUOTA_NOT_READ = "not read"


def quota_text(free: int | None, cores: int) -> str:
    """An option's quota cell: the free cores of its family and tier (None: no limit)."""
    if free is None:
        return "no limit"
    return f"{free:,} free" + ("" if cores <= free else f", short {cores - free:,}")


def _hours(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"


def _usd(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _within(option: Option, deadline: float | None, budget: float | None) -> str:
    marks = []
    if deadline is not None:
        marks.append("yes" if option.hours <= deadline else "no")
    if budget is not None:
        marks.append("yes" if option.cost_usd <= budget else "no")
    return " / ".join(marks) or "–"


def frontier_table(
    opts: list[Option],
    deadline: float | None,
    budget: float | None,
    recommended: Option | None,
    title: str,
    show_all: bool = False,
    quota: dict[tuple[str, str], int | None] | None = None,
) -> Table:
    """`quota`: free cores per (VM size, priority) as `azdl estimate --quota` read them."""
    from rich import box
    from rich.table import Table

    target = " / ".join(
        name for name, given in (("deadline", deadline), ("budget", budget)) if given is not None
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE)
    for name, justify in (
        ("", "left"), ("size", "left"), ("nodes", "right"), ("priority", "left"),
        ("images/s", "right"), ("hours", "right"), ("of it evictions", "right"), ("USD", "right"),
        (f"within {target}" if target else "within", "left"), ("cores needed", "right"),
        ("quota", "left"), ("throughput source", "left"),
    ):  # fmt: skip
        table.add_column(name, justify=justify, no_wrap=name != "throughput source")
    shown = [o for o in opts if o.eligible and (show_all or o.frontier)]
    if recommended is not None and recommended not in shown:
        shown.append(recommended)
    for o in sorted(shown, key=lambda o: (o.hours, o.cost_usd)):
        evictions = _hours(o.eviction_hours) if o.priority == LOW_PRIORITY else ""
        usd = _usd(o.cost_usd) + (" ≤" if o.price_note else "")
        table.add_row(
            "→" if o is recommended else ("*" if o.frontier else ""),
            o.vm_size, str(o.nodes), "low" if o.priority == LOW_PRIORITY else "dedicated",
            f"{o.rate.images_per_sec:,.0f}", _hours(o.hours), evictions, usd,
            _within(o, deadline, budget),
            f"{o.cores:,}",
            quota_text(quota[o.vm_size, o.priority], o.cores) if quota else QUOTA_NOT_READ,
            o.rate.short,
            style="bold" if o is recommended else None,
        )  # fmt: skip
    return table


def recommendation_line(o: Option) -> str:
    return (
        f"recommendation: {describe(o)}, {o.gpus} GPUs, {_hours(o.hours)} h, "
        f"{o.cost_usd:,.0f} USD (estimate), {o.cores:,} cores of quota"
    )


def plot(
    opts: list[Option],
    recommended: Option | None,
    deadline: float | None,
    budget: float | None,
    title: str,
    path: Path,
) -> None:
    """Cost against time of every priced option, the frontier as a line, the recommendation
    starred, the deadline and budget as dashed lines."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=120)
    ax = fig.add_subplot()
    eligible = [o for o in opts if o.eligible]
    sizes = sorted({o.vm_size for o in eligible})
    for i, size in enumerate(sizes):
        for priority, marker in (("Dedicated", "o"), (LOW_PRIORITY, "^")):
            points = [o for o in eligible if o.vm_size == size and o.priority == priority]
            if points:
                ax.scatter(
                    [o.hours for o in points], [o.cost_usd for o in points], marker=marker,
                    color=f"C{i}", alpha=0.7,
                    label=f"{size} ({'low priority' if priority == LOW_PRIORITY else 'dedicated'})",
                )  # fmt: skip
                for o in points:
                    ax.annotate(str(o.nodes), (o.hours, o.cost_usd), textcoords="offset points",
                                xytext=(4, 4), fontsize=7)  # fmt: skip
    front = sorted((o for o in eligible if o.frontier), key=lambda o: o.hours)
    if front:
        ax.plot([o.hours for o in front], [o.cost_usd for o in front], "-", color="black",
                linewidth=1, label="frontier")  # fmt: skip
    if recommended is not None:
        ax.scatter([recommended.hours], [recommended.cost_usd], marker="*", s=300, color="gold",
                   edgecolors="black", zorder=5, label="recommendation")  # fmt: skip
    if deadline is not None:
        ax.axvline(deadline, linestyle="--", color="red", label=f"deadline {deadline:g} h")
    if budget is not None:
        ax.axhline(budget, linestyle="--", color="purple", label=f"budget {budget:,.0f} USD")
    ax.set_xlabel("hours to train (node counts beside the points)")
    ax.set_ylabel("cost (USD, estimate)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)


def document(
    opts: list[Option],
    recommended: Option | None,
    needs: list[str],
    sources: list[str],
    context: dict,
    quota: dict[tuple[str, str], int | None] | None = None,
) -> dict:
    rec = None
    if recommended is not None:
        rec = {
            "vmSize": recommended.vm_size,
            "nodes": recommended.nodes,
            "priority": recommended.priority,
            "hours": recommended.hours,
            "costUsd": recommended.cost_usd,
        }
    return context | {
        "recommendation": rec,
        "nearest": needs,
        "sources": sources,
        "quota": QUOTA_NOT_READ
        if quota is None
        else [{"vmSize": s, "priority": p, "freeCores": f} for (s, p), f in quota.items()],
        "options": [o.as_dict() for o in opts],
    }
