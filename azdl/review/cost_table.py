"""The cost estimate as the reader sees it: the table of `azdl plan` (and the cost tables the
docs build renders from the same code), the epoch's cost and what is not priced."""

from __future__ import annotations

from typing import TYPE_CHECKING

from azdl.console import print_table

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from azdl.review import cost


def money(value: float | None) -> str:
    return "unpriced" if value is None else f"{value:,.2f}"


def cost_table(est: cost.Estimate) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"Estimated cost of stack {est.stack} (USD, estimate)",
        title_justify="left",
        box=box.SIMPLE,
    )
    table.add_column("item", overflow="fold")
    table.add_column("what", overflow="fold")
    table.add_column("per hour at max", justify="right", overflow="fold")
    table.add_column("per month idle floor", justify="right", overflow="fold")
    for line in est.lines:
        table.add_row(line.item, line.detail, money(line.max_per_hour), money(line.idle_per_month))
    missing = est.unpriced_lines
    # With an unpriced item the sums are lower bounds, and say so.
    bound = "≥ " if missing else ""
    what = f"incomplete: {missing} item{'s' if missing > 1 else ''} unpriced" if missing else ""
    table.add_row(
        "total", what, bound + money(est.max_per_hour), bound + money(est.idle_per_month),
        style="bold",
    )  # fmt: skip
    return table


def print_cost(console: Console, est: cost.Estimate) -> None:
    print_table(console, cost_table(est))
    if est.epoch:
        e = est.epoch
        console.print(
            f"one epoch ({e['images_per_epoch']:,} images at {e['images_per_sec']:,.1f} images/s): "
            f"{e['hours']:.2f} h on {e['nodes']} x {e['vm_size']} = {money(e['usd'])} USD",
            soft_wrap=True,
        )
    for item in est.unpriced:
        console.print(f"[bold red]not priced:[/] {item}", soft_wrap=True)
    for note in est.notes:
        console.print(f"note: {note}", soft_wrap=True)
