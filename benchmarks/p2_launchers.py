"""P2 under both launchers: the PyTorch flavour with 1 and 2 workers under Horovod (horovodrun
--gloo) and under torchrun (torch.distributed, DDP), side by side in one run.

    .venv/bin/python benchmarks/p2_launchers.py [--rounds 2] [--image-size 128]

The same work under each launcher: ResNet50 at 128 px on synthetic data, batch 16 per worker,
one thread per worker (`--threads 1`), as benchmarks/p2_scaling.py runs P2, each launcher with
its own local environment (azdl.local.local_env). Variants are interleaved round by round and
the median is reported. Two figures: P2 for each launcher, images/sec with 2 workers / (2 × with
1 worker), target ≥ 0.90; and torchrun against Horovod at 2 workers, target ≥ 0.95. The chart,
benchmarks/results/p2_launchers.png, is drawn from the results file alone (`--chart-only`).
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

from rich.console import Console

OUT = Path(__file__).resolve().parent / "results"
LAUNCHERS = {"Horovod": "horovod", "torchrun": "torchrun"}  # label: azdl's --launcher
VARIANTS = {f"{label}, {n} worker{'s' if n > 1 else ''}": (launcher, n)
            for label, launcher in LAUNCHERS.items() for n in (1, 2)}  # fmt: skip
P2_TARGET, VS_HOROVOD_TARGET = 0.90, 0.95
# The code its figures depend on, with p2_scaling's (measures(): its runner, the PyTorch
# training script and, through their imports, the launch path and torch.distributed's use).
MEASURES = ["benchmarks/p2_launchers.py"]


def figures(medians: dict[str, float]) -> dict[str, float]:
    """P2 per launcher and torchrun / Horovod at 2 workers, from the variants' medians."""
    result = {
        f"P2 {label}": medians[f"{label}, 2 workers"] / (2 * medians[f"{label}, 1 worker"])
        for label in LAUNCHERS
    }
    result["torchrun / Horovod, 2 workers"] = (
        medians["torchrun, 2 workers"] / medians["Horovod, 2 workers"]
    )
    return result


def chart(record: dict):
    """Images/sec of each variant (median), from the results file alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = {name: statistics.median(v) for name, v in record["data"]["rates"].items()}
    fig, ax = plt.subplots(figsize=(7, 3.6))
    colours = ["lightsteelblue", "tab:blue", "navajowhite", "tab:orange"]
    ax.bar([n.replace(", ", "\n") for n in medians], list(medians.values()), color=colours)
    ax.set_ylabel("images/sec (all workers)")
    ax.set_title(f"{record['title'].split(';')[0]}\nmeasured {record['date']}", fontsize=10)
    fig.tight_layout()
    return fig


def write_chart(results_json: Path = OUT / "p2_launchers.json") -> Path:
    path = results_json.with_suffix(".png")
    chart(json.loads(results_json.read_text())).savefig(path, dpi=120)
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=6, help="timed steps per run")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--chart-only", action="store_true", help="redraw the chart, run nothing")
    a = p.parse_args()
    if a.chart_only:
        print(f"chart: {write_chart()}")
        return 0
    from bench_results import Figure, Run
    from p2_scaling import images_per_sec, measures

    run, console = Run([*MEASURES, *measures("torch")]), Console()
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with console.status("running") as status:
        for r in range(a.rounds):
            for name, (launcher, workers) in VARIANTS.items():
                status.update(f"round {r + 1}/{a.rounds}: {name}")
                rates[name].append(images_per_sec("torch", workers, [], 1, a, launcher))
                console.log(f"round {r + 1} {name}: {rates[name][-1]:.1f} images/sec")
    medians = {name: statistics.median(v) for name, v in rates.items()}
    rows = [[name, f"{value:.1f}", ", ".join(f"{x:.1f}" for x in rates[name])]
            for name, value in medians.items()]  # fmt: skip
    results = figures(medians)
    rows += [[name, f"{value:.2f}", ""] for name, value in results.items()]
    title = (
        f"P2 under both launchers: torch ResNet50, {a.image_size} px, batch {a.batch_size}/worker,"
        f" one thread per worker; median of {a.rounds} rounds; P2 target ≥ {P2_TARGET:.2f}, "
        f"torchrun / Horovod target ≥ {VS_HOROVOD_TARGET:.2f}"
    )
    md = run.write(
        "p2_launchers",
        title,
        ["variant", "images/sec or ratio", "per round"],
        rows,
        data={"rates": rates},
        figures={name: Figure(value, a.rounds) for name, value in results.items()},
    )
    console.print(md.read_text())
    console.print(f"chart: {write_chart(md.with_suffix('.json'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
