"""How azdl writes to the terminal: colour, width, machine-readable output, and a reader that
stops early.

Commands that print tables make their rich Console here, so that all of them keep the same rules:
- colour is off with `--no-color` or a non-empty `NO_COLOR` (https://no-color.org/; rich
  honours it in every Console, the progress lines on stderr included), and when the stream is not
  a terminal;
- on a terminal, tables fit its width (rich measures it); piped or redirected, they fit
  `COLUMNS` if set, else the terminal the user sits at (stderr or stdin, as in `azdl plan dev |
  less`), else PIPED_WIDTH. A cell's text wraps inside its column; a table whose columns cannot
  fit even so (sizes and figures do not wrap) is printed one record per line (`print_table`).
  Nothing is cut.

`--json` output is a stable interface for scripts: `print_json` writes one JSON document with
a `schema` key (`azdl.<command>/v1`); fields are only ever added under the same version.

A reader that stops early (`azdl plan dev | head -1`) makes the next write fail with EPIPE; the
CLI ends quietly with READER_GONE (see `azdl.cli.main`). rich's own handling of that case exits
with 1 from inside the print; the Console made here hands it to the CLI instead.
"""

import json
import os
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# Width of tables written to a pipe or a file when neither COLUMNS nor a terminal says one: the
# width the docs show the commands' output at (docs/hooks/docs_hooks.py sets COLUMNS=100).
PIPED_WIDTH = 100
# Exit status when the reader of stdout went away: 128 + SIGPIPE, what a shell reports for
# `git log | head -1` (git dies of the signal; Python ignores SIGPIPE and gets EPIPE instead).
READER_GONE = 141


def disable_color() -> None:
    """`--no-color`: as NO_COLOR=1, for every console made after this call (and the processes
    this one starts)."""
    os.environ["NO_COLOR"] = "1"


def piped_width() -> int:
    """The width for output that is not a terminal (see the module docstring)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stderr, sys.stdin):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # closed, replaced, or not a terminal
            continue
    return PIPED_WIDTH


@cache
def _console_class() -> "type[Console]":
    """rich's Console, handing a closed pipe to the CLI (imported on first use: `azdl --help`
    and the refusals of bad input print no table)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to write; the CLI decides how the command ends
            raise BrokenPipeError

    return PipeConsole


def make_console(stderr: bool = False) -> "Console":
    stream = sys.stderr if stderr else sys.stdout
    return _console_class()(
        file=stream,
        width=None if stream.isatty() else piped_width(),
        no_color=bool(os.environ.get("NO_COLOR")),
        highlight=False,
        soft_wrap=False,
    )


def print_table(console: "Console", table: "Table") -> None:
    """`table` at the console's width, its cells wrapping inside their columns; or, when it is
    wider and a column may not wrap or would cut its text (`no_wrap`, or an overflow other than
    `fold`), its title and then one line per row: `header: cell` pairs joined by `; `, empty
    cells left out, a headerless column's cell (a marker such as `→`) first."""
    from rich.measure import Measurement

    # Measured as if there were room: rich clamps a measurement to the width it is given.
    needed = Measurement.get(console, console.options.update_width(1_000_000), table)
    wraps = all(not c.no_wrap and c.overflow == "fold" for c in table.columns)
    if needed.maximum <= console.width or (wraps and needed.minimum <= console.width):
        console.print(table)
        return
    if table.title:
        console.print(table.title, soft_wrap=True)
    headers = [str(column.header) for column in table.columns]
    for row in zip(*(column.cells for column in table.columns), strict=True):
        cells = [(h, str(cell)) for h, cell in zip(headers, row, strict=True) if str(cell)]
        marks = " ".join(v for h, v in cells if not h)  # a column without a header: a marker
        line = "; ".join(f"{h}: {v}" for h, v in cells if h)
        console.print(
            f"{marks} {line}" if marks else line, soft_wrap=True, markup=False, highlight=False
        )


def print_json(schema: str, document: dict[str, Any]) -> None:
    """One JSON document on stdout, `schema` first (see the module docstring)."""
    print(json.dumps({"schema": schema, **document}, indent=2))
