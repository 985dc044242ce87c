"""The performance targets and where each one's latest figure is in benchmarks/results/*.json.

`table()` is the Markdown table the docs' Benchmarks page shows (the docs hook generates it at
every build, and the README links to it): each target, the figures of its latest results file,
met or not, when and on what machine, and whether that run says it was measured on a shared
(loaded) machine. Nobody types a figure: a target without a results file says so.

    .venv/bin/python benchmarks/targets.py          # print the table
"""

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench_results

RESULTS_DIR = bench_results.RESULTS_DIR


def _number(cell) -> float:
    """The first number of a results cell: `383.2`, `0.55× (0.87×)`, `1.00`."""
    match = re.search(r"-?\d+(?:\.\d+)?", str(cell).replace(",", ""))
    if not match:
        raise ValueError(f"no number in results cell {cell!r}")
    return float(match[0])


def cells(column: str, rows: dict[str, str]) -> Callable[[dict], list[tuple[str, float]]]:
    """Figures from a bench_results table: `column` of the rows whose first cell is a key of
    `rows`, labelled with its value."""

    def figures(record: dict) -> list[tuple[str, float]]:
        index = record["headers"].index(column)
        found = {str(row[0]): _number(row[index]) for row in record["rows"]}
        missing = [r for r in rows if r not in found]
        if missing:
            raise ValueError(f"{record['name']}: no row {missing} (rows: {list(found)})")
        return [(label, found[key]) for key, label in rows.items()]

    return figures


def p3_synthetic(record: dict) -> list[tuple[str, float]]:
    """P3's own format (benchmarks/gpu/p3_report.py): the synthetic run's images/s."""
    return [(r["label"], r["images_per_sec"]) for r in record["rows"] if r["label"] == "synthetic"]


@dataclass(frozen=True)
class Target:
    results: str  # benchmarks/results/<results>.json
    what: str
    at_least: float
    unit: str
    figures: Callable[[dict], list[tuple[str, float]]]


TARGETS = [
    Target(
        "p1_vs_horovod",
        "P1: images/sec vs Horovod's own benchmark",
        1.00,
        "×",
        cells("ratio to baseline", {"ours: keras": "Keras", "ours: tf loop": "TF loop"}),
    ),
    Target(
        "p2_scaling",
        "P2: 2 workers vs 1, efficiency",
        0.90,
        "",
        cells("efficiency", {"2 workers": "2 workers"}),
    ),
    Target(
        "p2_launchers",
        "P2 under torchrun: 2 workers vs 1",
        0.90,
        "",
        cells("images/sec or ratio", {"P2 torchrun": "torchrun"}),
    ),
    Target(
        "p2_launchers",
        "PyTorch flavour, torchrun vs Horovod at 2 workers",
        0.95,
        "×",
        cells("images/sec or ratio", {"torchrun / Horovod, 2 workers": "2 workers"}),
    ),
    Target("p3_gpu", "P3: one H100, synthetic", 3000, " images/s", p3_synthetic),
    Target(
        "p4_input_pipeline",
        "P4: TF input, images/s per core",
        300,
        "",
        cells("per core", {"1": "1 core", "2": "2 cores"}),
    ),
    Target(
        "torch_input_pipeline",
        "PyTorch input, images/s per core",
        300,
        "",
        cells("per core", {"torch_data (PyTorch), normalised float": "1 core"}),
    ),
    Target(
        "p5_staging",
        "P5: `data stage` vs one stream",
        3.0,
        "×",
        cells(
            "ratio",
            {
                "16 × 16 MiB (one request each)": "16 × 16 MiB",
                "4 × 128 MiB (8 MiB blocks)": "4 × 128 MiB",
            },
        ),
    ),
]


def _show(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"


def loaded(record: dict) -> bool:
    """The run's own verdict (bench_results.markdown's rule) that other work shared its CPUs."""
    return "Measured on a shared machine" in bench_results.markdown(record)


def _where(record: dict, name: str, links: bool) -> str:
    """Date (with `links`, a link to the results file), GPU if any, and the loaded flag."""
    path = f"benchmarks/results/{name}.md"
    date = f"[{record['date'][:10]}]({path})" if links else f"{record['date'][:10]} (`{path}`)"
    if "machine" not in record:  # P3's own format
        return f"{date}, {record['device']}"
    where, gpu = date, record["machine"].get("gpu", "none")
    if gpu != "none":
        where += f", {gpu}"
    if loaded(record):
        peak = max(record["load_average"]["before"][0], record["load_average"]["after"][0])
        where += f", **loaded** (load {peak:.1f})"
    return where


def row(target: Target, results_dir: Path = RESULTS_DIR, links: bool = True) -> list[str]:
    what = f"{target.what} ≥ {_show(target.at_least)}{target.unit}"
    path = results_dir / f"{target.results}.json"
    if not path.is_file():
        return [what, "no results file yet", "not measured", "–"]
    record = json.loads(path.read_text())
    figures = target.figures(record)
    if not figures:
        raise ValueError(f"{path}: no figure for the target {target.what!r}")
    shown = ", ".join(f"{label} {_show(value)}{target.unit}" for label, value in figures)
    met = [value >= target.at_least for _, value in figures]
    verdict = "met" if all(met) else "not met" if not any(met) else "partly"
    return [what, shown, verdict, _where(record, target.results, links)]


def table(results_dir: Path = RESULTS_DIR, links: bool = True) -> str:
    """The table; `links` to the results files (relative to the repository root, as printed),
    or their paths only (the docs site, which does not hold them)."""
    lines = ["| target | latest figure | met? | measured |", "| --- | --- | --- | --- |"]
    for target in TARGETS:
        cells_ = row(target, results_dir, links)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells_) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
