"""The performance targets and where each one's latest figure is in benchmarks/results/*.json.

`table()` is the Markdown table the docs' Benchmarks page shows (the docs hook generates it at
every build, and the README links to it): each target, the figures of its latest results file,
met or not, when and on what machine, whether that run says it was measured on a shared
(loaded) machine, and the commit it measured. Nobody types a figure: a target without a results
file says so. Verdicts compare the unrounded figures a results file keeps (`figures`), and say
when one rests on a single sample. A figure whose code changed after its commit is stale, and
so is one without a commit (provenance.py): a stale figure is shown, but not judged.

    .venv/bin/python benchmarks/targets.py          # print the table
    .venv/bin/python benchmarks/targets.py --check  # exit 1, naming them, if a figure is stale

The check is the end of `make bench`, not a test: every commit that touches code a benchmark
imports makes its figure stale until someone re-measures it (minutes to an hour each), and the
table says so in bold meanwhile.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import bench_results
import provenance

RESULTS_DIR = bench_results.RESULTS_DIR
ROOT = provenance.ROOT


def p3_synthetic(record: dict) -> list[tuple[str, float, int]]:
    """P3's own format (benchmarks/gpu/p3_report.py): the synthetic run's images/s, one run."""
    return [
        (r["label"], r["images_per_sec"], 1) for r in record["rows"] if r["label"] == "synthetic"
    ]


@dataclass(frozen=True)
class Target:
    results: str  # benchmarks/results/<results>.json
    what: str
    at_least: float
    unit: str
    figures: dict[str, str]  # key in the results file's "figures": the label shown


TARGETS = [
    Target(
        "p1_vs_horovod",
        "P1: images/sec vs Horovod's own benchmark",
        1.00,
        "×",
        {"ours: keras": "Keras", "ours: tf loop": "TF loop"},
    ),
    Target("p2_scaling", "P2: 2 workers vs 1, efficiency", 0.90, "", {"2 workers": "2 workers"}),
    Target(
        "p2_launchers", "P2 under torchrun: 2 workers vs 1", 0.90, "", {"P2 torchrun": "torchrun"}
    ),
    Target(
        "p2_launchers",
        "PyTorch flavour, torchrun vs Horovod at 2 workers",
        0.95,
        "×",
        {"torchrun / Horovod, 2 workers": "2 workers"},
    ),
    Target("p3_gpu", "P3: one H100, synthetic", 3000, " images/s", {"synthetic": "synthetic"}),
    Target(
        "p4_input_pipeline",
        "P4: TF input, images/s per core",
        300,
        "",
        {"1 core, per core": "1 core", "2 cores, per core": "2 cores"},
    ),
    Target(
        "torch_input_pipeline",
        "PyTorch input, images/s per core",
        300,
        "",
        {"torch images/s per core": "1 core"},
    ),
    Target(
        "teardown_stress",
        "Finished two-worker torchrun runs under CPU load that exit 0, no thread left",
        1.00,
        "",
        {"runs that ended cleanly": "share of runs"},
    ),
    Target(
        "checkpoint_interval",
        "`--checkpoint-every-steps auto`: GPU-minutes the better of 2x and 1/2x its interval "
        "loses, over what auto loses",
        1.00,
        "×",
        {"fixed vs auto, GPU-minutes lost": "200 traces"},
    ),
    Target(
        "p5_staging",
        "P5: `data stage` vs one stream",
        3.0,
        "×",
        {
            "16 × 16 MiB (one request each)": "16 × 16 MiB",
            "4 × 128 MiB (8 MiB blocks)": "4 × 128 MiB",
        },
    ),
]


def figures(target: Target, record: dict) -> list[tuple[str, float, int]]:
    """(label, unrounded value, samples) of the target's figures in its results file."""
    if "machine" not in record:  # P3's own format
        return p3_synthetic(record)
    kept = record.get("figures") or {}
    missing = [key for key in target.figures if key not in kept]
    if missing:
        raise ValueError(
            f"{target.results}.json keeps no figure {missing} (it keeps {list(kept)}): "
            f"re-measure with benchmarks/{target.results}.py"
        )
    return [
        (label, kept[key]["value"], kept[key]["samples"]) for key, label in target.figures.items()
    ]


def _show(value: float, at_least: float | None = None) -> str:
    """`value` rounded for reading, with more digits where rounding would cross `at_least`
    (0.895 against 0.90 shows as 0.895, never as 0.90)."""
    digits = 2 if abs(value) < 10 else 0
    while at_least is not None and digits < 6:
        if (round(value, digits) >= at_least) == (value >= at_least):
            break
        digits += 1
    return f"{value:,.{digits}f}"


def loaded(record: dict) -> bool:
    """The run's own verdict (bench_results.markdown's rule) that other work shared its CPUs."""
    return "Measured on a shared machine" in bench_results.markdown(record)


def _where(record: dict, name: str, links: bool) -> str:
    """Date (with `links`, a link to the results file), GPU if any, the loaded flag, commit."""
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
    if record.get("commit"):
        where += f", commit `{record['commit'][:7]}`"
    return where


def verdict(target: Target, found: list[tuple[str, float, int]]) -> str:
    """met, not met or partly, from the unrounded figures; `1 sample` when one rests on one."""
    met = [value >= target.at_least for _, value, _ in found]
    said = "met" if all(met) else "not met" if not any(met) else "partly"
    return said + (", 1 sample" if min(samples for *_, samples in found) == 1 else "")


def row(
    target: Target, results_dir: Path = RESULTS_DIR, links: bool = True, root: Path = ROOT
) -> list[str]:
    """The target's row. Its figures are judged only when their code is current at HEAD in
    `root`: a stale figure shows why instead of a verdict; an unchecked one says so beside it."""
    what = f"{target.what} ≥ {_show(target.at_least)}{target.unit}"
    path = results_dir / f"{target.results}.json"
    if not path.is_file():
        return [what, "no results file yet", "not measured", "–"]
    record = json.loads(path.read_text())
    fresh = provenance.freshness(record, root)
    where = _where(record, target.results, links)
    if "machine" in record and "figures" not in record and not record.get("commit"):
        return [what, "not kept unrounded (an older results file)", f"**{fresh.text}**", where]
    found = figures(target, record)
    if not found:
        raise ValueError(f"{path}: no figure for the target {target.what!r}")
    shown = ", ".join(
        f"{label} {_show(value, target.at_least)}{target.unit}" for label, value, _ in found
    )
    if fresh.state == "stale":
        return [what, shown, f"**{fresh.text}**", where]
    said = verdict(target, found)
    if fresh.state == "unchecked":
        said += f"; **{fresh.text}**"
    return [what, shown, said, where]


def table(results_dir: Path = RESULTS_DIR, links: bool = True, root: Path = ROOT) -> str:
    """The table; `links` to the results files (relative to the repository root, as printed),
    or their paths only (the docs site, which does not hold them)."""
    lines = ["| target | latest figure | met? | measured |", "| --- | --- | --- | --- |"]
    for target in TARGETS:
        cells_ = row(target, results_dir, links, root)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells_) + " |")
    return "\n".join(lines) + "\n"


def stale() -> list[str]:
    """`<results>: why` for every target whose figure is not current at HEAD, or missing."""
    found = []
    for target in TARGETS:
        path = RESULTS_DIR / f"{target.results}.json"
        if not path.is_file():
            found.append(f"{target.results}: no results file")
            continue
        fresh = provenance.freshness(json.loads(path.read_text()))
        if not fresh.current:
            found.append(f"{target.results}: {fresh.text}")
    return list(dict.fromkeys(found))


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        if problems := stale():
            sys.exit("error: figures to re-measure:\n  " + "\n  ".join(problems))
        print("every figure in the targets table measured the code at HEAD")
    elif sys.argv[1:]:
        sys.exit(f"error: unknown arguments {sys.argv[1:]}; allowed: --check, or none")
    else:
        sys.stdout.write(table())
