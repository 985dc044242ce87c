"""Benchmark results files: every benchmark script ends by writing its figures here.

`Run().write(name, ...)` writes benchmarks/results/<name>.md (a Markdown table plus a line
saying when, where and how it was measured; the docs include it with `--8<--`) and <name>.json
(the same, machine-readable). Nobody retypes a figure: the docs show exactly these files.
The load average is recorded before and after the run, so a figure taken on a shared machine
says so. Each run declares the code its figures depend on (`Run(measures)`); the results file
records those paths with the commit and the tree's uncommitted changes (provenance.py), so the
targets table can tell a figure whose code has changed since. The figures a target judges are
kept unrounded, with the number of samples each rests on (`figures`).
"""

import json
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import provenance

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> dict:
    gpus = os.environ.get("AZDL_BENCH_GPU")  # set by GPU runs; CPU-only here otherwise
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "gpu": gpus or "none",
    }


@dataclass(frozen=True)
class Figure:
    """A figure a target is judged by: its value unrounded, and how many measurements (rounds,
    repeats) it rests on."""

    value: float
    samples: int


def _source(measures: list[str]) -> dict:
    try:
        return provenance.measured(measures)
    except provenance.GitError as e:
        sys.exit(f"error: cannot record which code this run measures: {e}")


class Run:
    """Context of one benchmark run: start time and load, the command line, and the code it
    measures (`measures`: git pathspecs from the repository root, the script's own file among
    them), recorded at the start."""

    def __init__(self, measures: list[str]) -> None:
        self.measures = list(measures)
        self.source = _source(self.measures)
        if self.source["dirty_measured"]:
            print(
                "note: measuring uncommitted changes to "
                f"{', '.join(self.source['dirty_measured'])}: the targets table shows these "
                "figures as stale until they are measured on a commit",
                file=sys.stderr,
            )
        self.started = time.time()
        self.load_before = os.getloadavg()
        self.command = shlex.join([Path(sys.executable).name, *sys.argv]).replace(
            str(Path.cwd()) + "/", ""
        )

    def write(
        self,
        name: str,
        title: str,
        headers: list[str],
        rows: list[list],
        *,
        notes: list[str] = (),
        data: dict | None = None,
        figures: dict[str, Figure] | None = None,
    ) -> Path:
        """Write benchmarks/results/<name>.md and .json; returns the .md path. Refuses when the
        measured code changed during the run (a commit, or an edit to a measured file)."""
        now = _source(self.measures)
        for key in ("commit", "dirty_measured"):
            if now[key] != self.source[key]:
                sys.exit(
                    f"error: {key} changed during the run ({self.source[key]} → {now[key]}): "
                    f"the figures measured neither for certain; {name} not written"
                )
        RESULTS_DIR.mkdir(exist_ok=True)
        record = {
            "name": name,
            "title": title,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started, 1),
            "machine": machine(),
            "load_average": {"before": self.load_before, "after": os.getloadavg()},
            "niceness": os.nice(0),  # `nice -n 5` leaves the CPU to others first
            "command": self.command,
            **self.source,
            "measures": self.measures,
            "figures": {key: asdict(f) for key, f in (figures or {}).items()},
            "headers": headers,
            "rows": rows,
            "notes": list(notes),
            "data": data or {},
        }
        md = RESULTS_DIR / f"{name}.md"
        md.write_text(markdown(record))
        md.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"results: {md.relative_to(RESULTS_DIR.parent.parent)} (+ .json)")
        return md


def markdown(record: dict) -> str:
    """The results file the docs include: title, table, notes, and where/when/how measured."""
    box, load = record["machine"], record["load_average"]
    # Conservative: the load after a run also counts its own processes (Azurite, workers), so a
    # run can flag itself; better a needless warning than a contaminated figure without one.
    shared = max(load["before"][0], load["after"][0]) > box["usable_cores"]
    notes = list(record["notes"])
    if shared:
        notes.append(
            "**Measured on a shared machine** (load average above its core count): other work "
            "took CPU time from this run; re-run on a quiet machine before quoting the figures."
        )
    headers = record["headers"]
    lines = [
        f"**{record['title']}**",
        "",
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---" for _ in headers) + " |",
        *("| " + " | ".join(str(c) for c in row) + " |" for row in record["rows"]),
        "",
        *(f"{note}  " for note in notes),
        f"Measured {record['date']} in {record['seconds']:.0f} s on {box['cores']} cores "
        f"({box['usable_cores']} usable), {box['cpu']}, GPU: {box['gpu']}, {box['system']}, "
        f"Python {box['python']}; load average {load['before'][0]:.1f} before, "
        f"{load['after'][0]:.1f} after (1-minute)"
        + (f", niceness {record['niceness']}" if record.get("niceness") else "")
        + ".  ",
        f"{_code(record)}  ",
        f"Command: `{record['command']}`",
        "",
    ]
    return "\n".join(lines)


def _code(record: dict) -> str:
    """The line saying which code was measured: commit, uncommitted changes, declared paths."""
    if not record.get("commit"):
        return "Commit: not recorded (the file predates it; re-measure)."
    line = f"Commit `{record['commit'][:12]}`"
    if record["dirty_measured"]:
        changed = _listed(record["dirty_measured"])
        line += f", **with uncommitted changes to measured files**: {changed}"
    elif record["dirty"]:
        line += f" (uncommitted changes elsewhere: {_listed(record['dirty_files'])})"
    else:
        line += " (clean tree)"
    declared = ", ".join(f"`{p}`" for p in record["measures"])
    more = len(record["paths"]) - len(record["measures"])
    imported = f" and {more} more files they import (listed in the .json)" if more else ""
    return f"{line}; measures {declared}{imported}."


def _listed(files: list[str], shown: int = 5) -> str:
    names = ", ".join(f"`{f}`" for f in files[:shown])
    return names + (f" and {len(files) - shown} more" if len(files) > shown else "")


if __name__ == "__main__":  # re-render every .md from its .json (after a change to markdown())
    for path in sorted(RESULTS_DIR.glob("*.json")):
        path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
