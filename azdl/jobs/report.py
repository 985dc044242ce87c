"""Scaling reports: results.json, a Markdown table and a PNG plot from a set of runs; a run that
did not measure stays in the report, marked (docs/architecture.md, "Scaling report")."""

import json
from dataclasses import asdict, dataclass
from pathlib import Path

SCHEMA = "azdl.bench/v1"


@dataclass
class Run:
    nodes: int
    workers: int  # GPUs on a cluster; worker processes locally
    status: str  # Completed, Failed, Canceled, … ; locally "exit N"; "error" if azdl failed
    job: str  # Azure ML job name, or the local run's log file
    record: dict | None = None  # the run's throughput record (last one in its log)
    error: str | None = None  # why there is no record, or what went wrong around the run

    @property
    def images_per_sec(self) -> float | None:
        return (self.record or {}).get("images_per_sec")

    @property
    def measured(self) -> bool:
        """Completed with a throughput figure: the only runs the report counts."""
        return self.status == "Completed" and bool(self.images_per_sec)


def baseline(runs: list[Run]) -> Run | None:
    """The measured run with the fewest workers (None when nothing was measured)."""
    measured = [r for r in runs if r.measured]
    return min(measured, key=lambda r: (r.workers, r.nodes)) if measured else None


def with_efficiency(runs: list[Run]) -> list[dict]:
    """Each run as a dict with `counted`, and for measured runs images/s, images/s per worker
    and efficiency against the baseline (None otherwise; an uncounted run's own figure stays in
    its `record`)."""
    base = baseline(runs)
    rows = []
    for run in sorted(runs, key=lambda r: (r.workers, r.nodes)):
        row = asdict(run) | {"counted": run.measured, "images_per_sec": None}
        row["per_worker"] = row["efficiency"] = None
        if run.measured and base is not None:
            row["images_per_sec"] = run.images_per_sec
            row["per_worker"] = run.images_per_sec / run.workers
            row["efficiency"] = row["per_worker"] / (base.images_per_sec / base.workers)
        rows.append(row)
    return rows


def baseline_note(runs: list[Run], unit: str, unit_singular: str) -> str:
    """One sentence naming the baseline, and why when it is not the smallest run."""
    base = baseline(runs)
    if base is None:
        return "No run completed with a throughput figure: there is no baseline."
    smallest = min(runs, key=lambda r: (r.workers, r.nodes))
    note = f"Efficiency is against {describe(base, unit, unit_singular)}"
    if smallest.workers < base.workers:
        missing = describe(smallest, unit, unit_singular)
        note += f", the smallest measured run ({missing} was not measured)"
    return note + "."


def describe(run: Run, unit: str, unit_singular: str) -> str:
    workers = unit if run.workers != 1 else unit_singular
    return f"{run.nodes} node{'s' if run.nodes != 1 else ''}, {run.workers} {workers}"


def markdown_table(rows: list[dict], unit: str, unit_singular: str) -> str:
    lines = [
        f"| nodes | {unit} | images/sec | per {unit_singular} | efficiency | status |",
        "| ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        uncounted = (row["record"] or {}).get("images_per_sec")
        if row["counted"]:
            figures = (
                f"{row['images_per_sec']:.1f} | {row['per_worker']:.1f} | {row['efficiency']:.0%}"
            )
        elif uncounted:
            figures = f"({uncounted:.1f}, not counted) | – | –"
        else:
            figures = "– | – | –"
        status = row["status"] if not row["error"] else f"{row['status']}: {row['error']}"
        lines.append(f"| {row['nodes']} | {row['workers']} | {figures} | {status} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], title: str, unit: str, path: Path) -> None:
    """images/s against workers with the ideal (linear) line; efficiency on a second axis.
    Runs that do not count are red crosses at their last figure (or at 0)."""
    from matplotlib.figure import Figure  # here, not at import: `azdl estimate` reads SCHEMA

    fig = Figure(figsize=(7, 4.5), dpi=120)
    ax = fig.add_subplot()
    ok = [r for r in rows if r["counted"]]
    failed = [r for r in rows if not r["counted"]]
    if ok:
        xs = [r["workers"] for r in ok]
        base = ok[0]  # rows are sorted by workers: the first counted one is the baseline
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
        y = (row["record"] or {}).get("images_per_sec") or 0
        label = row["status"] + (" (not counted)" if y else "")
        ax.plot([row["workers"]], [y], "x", color="red", markersize=10)
        ax.annotate(label, (row["workers"], y), textcoords="offset points",
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


def write_report(
    runs: list[Run],
    out_dir: Path,
    title: str,
    unit: str,
    unit_singular: str,
    vm_size: str | None = None,
) -> dict[str, Path]:
    """results.json, results.md and scaling.png in `out_dir`; returns their paths.

    `unit` names the workers in the plural ("GPUs", "processes"), `unit_singular` in the
    singular ("GPU", "process"). `vm_size` is the cluster's size (None for local runs): with it
    the results feed `azdl estimate --bench`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = with_efficiency(runs)
    paths = {
        "json": out_dir / "results.json",
        "table": out_dir / "results.md",
        "plot": out_dir / "scaling.png",
    }
    heading = title.replace("\n", ", ")  # the plot's title may take two lines
    base = baseline(runs)
    note = baseline_note(runs, unit, unit_singular)
    document = {
        "schema": SCHEMA,
        "title": heading,
        "vm_size": vm_size,
        "unit": unit,
        "baseline": {"nodes": base.nodes, "workers": base.workers, "job": base.job}
        if base
        else None,
        "baseline_note": note,
        "runs": rows,
    }
    paths["json"].write_text(json.dumps(document, indent=2) + "\n")
    paths["table"].write_text(
        f"## {heading}\n\n{note}\n\n{markdown_table(rows, unit, unit_singular)}"
    )
    plot(rows, title, unit, paths["plot"])
    return paths
