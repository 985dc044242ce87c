"""azdl.console's output rules on their own: a table fits the width, or prints one record per
line, and nothing is cut."""

import io

from rich.console import Console
from rich.table import Table

from azdl.console import print_table


def printed(table: Table, width: int) -> list[str]:
    out = io.StringIO()
    print_table(Console(file=out, width=width, no_color=True), table)
    return out.getvalue().splitlines()


def sizes() -> Table:
    table = Table(title="Options")
    for name in ("", "size", "nodes"):
        table.add_column(name, no_wrap=True)  # sizes and figures do not wrap
    table.add_row("→", "Standard_ND96isr_H100_v5", "4")
    table.add_row("", "Standard_NC24ads_A100_v4", "1")
    return table


def test_a_table_that_fits_is_a_table():
    lines = printed(sizes(), 80)
    assert any("Standard_ND96isr_H100_v5" in line and "│" in line for line in lines)


def test_one_too_wide_for_its_columns_is_one_record_per_line_with_nothing_cut():
    assert printed(sizes(), 20) == [
        "Options",
        "→ size: Standard_ND96isr_H100_v5; nodes: 4",
        "size: Standard_NC24ads_A100_v4; nodes: 1",
    ]


def test_one_whose_cells_wrap_stays_a_table_at_the_width():
    table = Table(title="Cost")
    table.add_column("item", overflow="fold")
    table.add_column("what", overflow="fold")
    table.add_row("cluster", "four nodes of a size with eight GPUs each, at the list price")
    lines = printed(table, 40)
    assert max(len(line) for line in lines) <= 40 and "…" not in "".join(lines)
    assert "eight" in " ".join(lines) and not any(line.startswith("item:") for line in lines)
