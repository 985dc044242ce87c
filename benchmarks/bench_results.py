"""Benchmark results files: every benchmark script ends by writing its figures here.

`write_results(name, ...)` writes benchmarks/results/<name>.md (a Markdown table plus a line
saying when, where and how it was measured; the docs include it with `--8<--`) and <name>.json
(the same, machine-readable). Nobody retypes a figure: the docs show exactly these files.
The load average is recorded before and after the run, so a figure taken on a shared machine
says so.
"""

import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

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


class Run:
    """Context of one benchmark run: start time and load, the command line."""

    def __init__(self) -> None:
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
    ) -> Path:
        """Write benchmarks/results/<name>.md and .json; returns the .md path."""
        RESULTS_DIR.mkdir(exist_ok=True)
        load_after = os.getloadavg()
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.started))
        box = machine()
        seconds = time.time() - self.started
        load = f"{self.load_before[0]:.1f} before, {load_after[0]:.1f} after (1-minute)"
        where = (
            f"{box['cores']} cores ({box['usable_cores']} usable), {box['cpu']}, "
            f"GPU: {box['gpu']}, {box['system']}, Python {box['python']}"
        )
        lines = [
            f"**{title}**",
            "",
            "| " + " | ".join(headers) + " |",
            "| " + " | ".join("---" for _ in headers) + " |",
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
            "",
            *(f"{note}  " for note in notes),
            f"Measured {when} in {seconds:.0f} s on {where}; load average {load}.  ",
            f"Command: `{self.command}`",
            "",
        ]
        md = RESULTS_DIR / f"{name}.md"
        md.write_text("\n".join(lines))
        record = {
            "name": name,
            "title": title,
            "date": when,
            "seconds": round(seconds, 1),
            "machine": box,
            "load_average": {"before": self.load_before, "after": load_after},
            "command": self.command,
            "headers": headers,
            "rows": rows,
            "notes": list(notes),
            "data": data or {},
        }
        md.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"results: {md.relative_to(RESULTS_DIR.parent.parent)} (+ .json)")
        return md
