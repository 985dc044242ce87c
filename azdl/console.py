"""How azdl writes to the terminal: colour, width, and machine-readable output.

Commands that print tables make their rich Console here, so that all of them keep the same rules:
- colour is off with `--no-color` or a non-empty `NO_COLOR` (https://no-color.org/; rich
  honours it in every Console, the progress lines on stderr included), and when the stream is not
  a terminal;
- on a terminal, tables fit its width (rich measures it); piped or redirected, no width is
  assumed (`COLUMNS` if set, else each line as long as its content), so nothing is cut or wrapped
  at an arbitrary column.

`--json` output is a stable interface for scripts: `print_json` writes one JSON document with
a `schema` key (`azdl.<command>/v1`); fields are only ever added under the same version.
"""

import json
import os
import sys
from typing import Any

from rich.console import Console

# Width for output that is not a terminal and has no COLUMNS: wide enough that no table or
# line is ever wrapped (rich pads nothing beyond a renderable's own width).
UNBOUNDED = 10_000


def disable_color() -> None:
    """`--no-color`: as NO_COLOR=1, for every console made after this call (and the processes
    this one starts)."""
    os.environ["NO_COLOR"] = "1"


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else UNBOUNDED
    return Console(
        file=stream,
        width=width,
        no_color=bool(os.environ.get("NO_COLOR")),
        highlight=False,
        soft_wrap=False,
    )


def print_json(schema: str, document: dict[str, Any]) -> None:
    """One JSON document on stdout, `schema` first (see the module docstring)."""
    print(json.dumps({"schema": schema, **document}, indent=2))
