"""P2: scaling efficiency on this machine — 2 workers vs 1, one CPU thread each.

    .venv/bin/python benchmarks/p2_scaling.py [--framework keras] [--transport mpi] [--rounds 2]

Runs our training script (ResNet50 at 128 px, synthetic data) with 1 worker and with 2
workers, each worker limited to one thread (`--threads 1`), the 2-worker run with and without
fp16 allreduce compression. ResNet50's gradients are 100 MB a step, and an allreduce of them
takes about 0.4 s (MPI) to 0.6 s (Gloo) on this 2-core machine: at small images the allreduce,
not the model, sets the pace; the default 128 px keeps a run near a minute. Efficiency =
images/sec with 2 workers / (2 × images/sec with 1 worker); target ≥ 0.90. A fourth variant,
two separate 1-worker jobs at the same time, measures what this machine gives two processes
at all (its "efficiency" is the ceiling for Horovod's). Variants are interleaved round by
round and the median is reported. The chart, benchmarks/results/p2_scaling.png, is drawn from the
results file alone (`--chart-only` redraws it from the committed one).
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from azdl.envs import PACKAGES_ROOT
from azdl.local import launch_command, local_env
from training.flavours import entry_module
from training.throughput import parse_throughput_lines

OUT = PACKAGES_ROOT / "benchmarks" / "results"  # charts beside the results files the docs show
# The code its figures depend on, with the flavour's training script (measures()): bench_results
# adds every module these import, the launch path (azdl/local.py) among them; the pinned
# libraries, and Horovod's build (its flags are in setup-training.sh).
MEASURES = [
    "benchmarks/p2_scaling.py",
    "training/requirements.txt",
    "training/install/setup-training.sh",
]
VARIANTS = {  # name: (workers per job, extra arguments, jobs at once)
    "1 worker": (1, [], 1),
    "2 workers": (2, [], 1),
    "2 workers, fp16 allreduce": (2, ["--fp16-allreduce"], 1),
    # The machine's own ceiling: two separate 1-worker jobs at once, nothing shared.
    "2 separate 1-worker jobs": (1, [], 2),
}


def measures(*frameworks: str) -> list[str]:
    """MEASURES and the training script of each flavour run (python -m, so not an import)."""
    return [*MEASURES, *(f"{entry_module(f).replace('.', '/')}.py" for f in frameworks)]


def images_per_sec(
    framework: str, workers: int, extra: list[str], jobs: int, a, launcher: str | None = None
) -> float:
    """Total images/sec of `jobs` identical jobs run at the same time, under `launcher`
    (default: --launcher)."""
    launcher = launcher or a.launcher
    args = [
        "--model", "resnet50", "--image-size", str(a.image_size),
        "--num-classes", str(a.num_classes), "--batch-size", str(a.batch_size),
        "--epochs", "1", "--steps-per-epoch", str(a.steps + a.warmup_steps),
        "--timing-warmup-steps", str(a.warmup_steps), "--threads", "1",
        "--warmup-epochs", "0", "--lr-decay", "none", *extra,
    ]  # fmt: skip
    cmd = launch_command(framework, workers, launcher, args,
                         transport=getattr(a, "transport", "gloo"))  # fmt: skip
    env = local_env(launcher, workers)
    procs = [
        subprocess.Popen(cmd, cwd=PACKAGES_ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(jobs)
    ]
    total = 0.0
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"error: benchmark run failed:\n{out[-3000:]}")
        (record,) = parse_throughput_lines(out)
        total += record["images_per_sec"]
    return total


def chart(record: dict):
    """P2's chart, drawn from its results file alone (benchmarks/results/p2_scaling.json): the
    median images/sec of each variant, the linear line and the 90 % target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = {name: statistics.median(v) for name, v in record["data"]["rates"].items()}
    ideal = 2 * medians["1 worker"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    colours = ["grey", "tab:blue", "tab:orange", "lightgrey"]
    ax.bar([n.replace(", ", "\n") for n in medians], list(medians.values()), color=colours)
    ax.axhline(ideal, linestyle="--", color="black", label="linear (2 × 1 worker)")
    ax.axhline(0.9 * ideal, linestyle=":", color="red", label="target (90 %)")
    ax.set_ylabel("images/sec (all workers)")
    import bench_results

    title = record["title"].split(", one thread")[0].replace("P2 ", "P2: ", 1)
    loaded = "Measured on a shared machine" in bench_results.markdown(record)
    when = f"measured {record['date']}" + (" on a loaded machine" if loaded else "")
    ax.set_title(f"{title}\n{when}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def write_chart(results_json: Path = OUT / "p2_scaling.json") -> Path:
    path = results_json.with_suffix(".png")
    chart(json.loads(results_json.read_text())).savefig(path, dpi=120)
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["keras", "tf", "torch"], default="keras")
    p.add_argument("--launcher", choices=["horovod", "torchrun"], default="horovod")
    p.add_argument("--transport", choices=["gloo", "mpi"], default="gloo",
                   help="Horovod's: horovodrun --gloo or plain mpirun")  # fmt: skip
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=6, help="timed steps per run")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--chart-only",
        action="store_true",
        help="redraw the chart from benchmarks/results/p2_scaling.json, run nothing",
    )
    a = p.parse_args()
    if a.chart_only:
        print(f"chart: {write_chart()}")
        return 0
    from bench_results import Figure, Run

    run = Run(measures(a.framework))
    console = Console()
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with console.status("running") as status:
        for r in range(a.rounds):
            for name, (workers, extra, jobs) in VARIANTS.items():
                status.update(f"round {r + 1}/{a.rounds}: {name}")
                rates[name].append(images_per_sec(a.framework, workers, extra, jobs, a))
                console.log(f"round {r + 1} {name}: {rates[name][-1]:.1f} images/sec")
    medians = {name: statistics.median(v) for name, v in rates.items()}
    single = medians["1 worker"]
    title = f"P2 {a.framework}, {a.launcher}, {a.image_size} px, batch {a.batch_size}/worker"
    table = Table(title=f"{title} (median of {a.rounds} rounds; target ≥ 0.90)")
    for column in ("variant", "images/sec", "per round", "efficiency"):
        table.add_column(column)
    for name, value in medians.items():
        workers = VARIANTS[name][0] * VARIANTS[name][2]
        rounds = ", ".join(f"{x:.1f}" for x in rates[name])
        table.add_row(name, f"{value:.1f}", rounds, f"{value / (workers * single):.2f}")
    console.print(table)
    rows, figures = [], {}
    for name, value in medians.items():
        workers = VARIANTS[name][0] * VARIANTS[name][2]
        rounds = ", ".join(f"{x:.1f}" for x in rates[name])
        rows.append([name, f"{value:.1f}", rounds, f"{value / (workers * single):.2f}"])
        figures[name] = Figure(value / (workers * single), a.rounds)  # efficiency
    md = run.write(
        "p2_scaling",
        f"{title}, one thread per worker; median of {a.rounds} rounds; target ≥ 0.90",
        ["variant", "images/sec", "per round", "efficiency"],
        rows,
        data={"rates": rates},
        figures=figures,
    )
    console.print(f"chart: {write_chart(md.with_suffix('.json'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
