"""Scaling reports: results.json, a Markdown table and a PNG plot from a set of runs.

A run is one job (or one local launch) at a node/worker count. Its throughput is the
`azdl.throughput/v1` record rank 0 printed; a run that crashed or printed no record stays in
the report with its status, so a gap in the table is never silent. Efficiency compares images/s
per GPU (or per worker) with the smallest successful run, normally 1 node.
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from matplotlib.figure import Figure

SCHEMA = "azdl.bench/v1"


@dataclass
class Run:
    nodes: int
    workers: int  # GPUs on a cluster; worker processes locally
    status: str  # Completed, Failed, Canceled, … ; locally "exit N" for a failed launch
    job: str  # Azure ML job name, or the local run's log file
    record: dict | None = None  # the run's throughput record (last one in its log)
    error: str | None = None  # why there is no record, when there is none

    @property
    def images_per_sec(self) -> float | None:
        return (self.record or {}).get("images_per_sec")


def with_efficiency(runs: list[Run]) -> list[dict]:
    """Each run as a dict, plus images/s per worker and efficiency against the baseline: the
    successful run with the fewest workers (None for runs without a throughput figure)."""
    measured = [r for r in runs if r.images_per_sec]
    base = min(measured, key=lambda r: r.workers) if measured else None
    rows = []
    for run in sorted(runs, key=lambda r: (r.workers, r.nodes)):
        row = asdict(run) | {"images_per_sec": run.images_per_sec}
        row["per_worker"] = row["efficiency"] = None
        if run.images_per_sec and base is not None:
            per_worker = run.images_per_sec / run.workers
            row["per_worker"] = per_worker
            row["efficiency"] = per_worker / (base.images_per_sec / base.workers)
        rows.append(row)
    return rows


def markdown_table(rows: list[dict], unit: str) -> str:
    lines = [
        f"| nodes | {unit} | images/sec | per {unit.rstrip('s')} | efficiency | status |",
        "| ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        if row["images_per_sec"]:
            figures = (
                f"{row['images_per_sec']:.1f} | {row['per_worker']:.1f} | {row['efficiency']:.0%}"
            )
        else:
            figures = "– | – | –"
        status = row["status"] if not row["error"] else f"{row['status']}: {row['error']}"
        lines.append(f"| {row['nodes']} | {row['workers']} | {figures} | {status} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], title: str, unit: str, path: Path) -> None:
    """images/s against workers with the ideal (linear) line; efficiency on a second axis."""
    fig = Figure(figsize=(7, 4.5), dpi=120)
    ax = fig.add_subplot()
    ok = [r for r in rows if r["images_per_sec"]]
    failed = [r for r in rows if not r["images_per_sec"]]
    if ok:
        xs = [r["workers"] for r in ok]
        base = min(ok, key=lambda r: r["workers"])
        per_worker = base["images_per_sec"] / base["workers"]
        span = sorted({r["workers"] for r in rows})
        ideal = [per_worker * x for x in span]
        ax.plot(span, ideal, "--", color="grey", label="ideal (linear from the baseline)")
        ax.plot(xs, [r["images_per_sec"] for r in ok], "o-", color="C0", label="measured")
        eff = ax.twinx()
        eff.plot(xs, [100 * r["efficiency"] for r in ok], "s:", color="C1", label="efficiency")
        eff.set_ylim(0, 110)
        eff.set_ylabel("scaling efficiency (%)", color="C1")
        lines, labels = ax.get_legend_handles_labels()
        more, more_labels = eff.get_legend_handles_labels()
        ax.legend(lines + more, labels + more_labels, loc="lower right")
    for row in failed:
        ax.plot([row["workers"]], [0], "x", color="red", markersize=10)
        ax.annotate(row["status"], (row["workers"], 0), textcoords="offset points",
                    xytext=(0, 8), ha="center", color="red")  # fmt: skip
    ax.set_xlabel(unit)
    ax.set_ylabel("images/sec")
    ax.set_xticks(sorted({r["workers"] for r in rows}))
    ax.margins(x=0.1)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def write_report(runs: list[Run], out_dir: Path, title: str, unit: str) -> dict[str, Path]:
    """results.json, results.md and scaling.png in `out_dir`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = with_efficiency(runs)
    paths = {
        "json": out_dir / "results.json",
        "table": out_dir / "results.md",
        "plot": out_dir / "scaling.png",
    }
    heading = title.replace("\n", ", ")  # the plot's title may take two lines
    document = {"schema": SCHEMA, "title": heading, "unit": unit, "runs": rows}
    paths["json"].write_text(json.dumps(document, indent=2) + "\n")
    paths["table"].write_text(f"## {heading}\n\n{markdown_table(rows, unit)}")
    plot(rows, title, unit, paths["plot"])
    return paths
