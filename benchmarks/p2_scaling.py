"""P2: scaling efficiency on this machine — 2 workers vs 1, one CPU thread each.

    .venv/bin/python benchmarks/p2_scaling.py [--framework keras] [--rounds 2]

Runs our training script (ResNet50, synthetic data) with 1 worker and with 2 workers, each
worker limited to one thread (`--threads 1`), the 2-worker run with and without fp16 allreduce
compression. Efficiency = images/sec with 2 workers / (2 × images/sec with 1 worker); target
≥ 0.90. Variants are interleaved round by round and the median is reported. Writes a chart to
out/benchmarks/p2_scaling.png.
"""

import argparse
import statistics
import subprocess
import sys

from rich.console import Console
from rich.table import Table

from azdl.commands.train import launch_command
from azdl.envs import REPO_ROOT, training_env
from training.throughput import parse_throughput_lines

OUT = REPO_ROOT / "out" / "benchmarks"
VARIANTS = {  # name: (workers, extra arguments)
    "1 worker": (1, []),
    "2 workers": (2, []),
    "2 workers, fp16 allreduce": (2, ["--fp16-allreduce"]),
}


def images_per_sec(framework: str, workers: int, extra: list[str], a) -> float:
    args = [
        "--model", "resnet50", "--image-size", str(a.image_size),
        "--num-classes", str(a.num_classes), "--batch-size", str(a.batch_size),
        "--epochs", "1", "--steps-per-epoch", str(a.steps + a.warmup_steps),
        "--timing-warmup-steps", str(a.warmup_steps), "--threads", "1",
        "--warmup-epochs", "0", "--lr-decay", "none", *extra,
    ]  # fmt: skip
    cmd = launch_command(framework, workers, "gloo", args)
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "2"})
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: benchmark run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (record,) = parse_throughput_lines(proc.stdout)
    return record["images_per_sec"]


def plot(medians: dict[str, float], a) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(parents=True, exist_ok=True)
    ideal = 2 * medians["1 worker"]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(list(medians), list(medians.values()), color=["grey", "tab:blue", "tab:orange"])
    ax.axhline(ideal, linestyle="--", color="black", label="linear (2 × 1 worker)")
    ax.axhline(0.9 * ideal, linestyle=":", color="red", label="target (90 %)")
    ax.set_ylabel("images/sec (all workers)")
    ax.set_title(f"P2: {a.framework}, ResNet50 {a.image_size}px, batch {a.batch_size}/worker")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "p2_scaling.png", dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["keras", "tf", "torch"], default="keras")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=15, help="timed steps per run")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    console = Console()
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with console.status("running") as status:
        for r in range(a.rounds):
            for name, (workers, extra) in VARIANTS.items():
                status.update(f"round {r + 1}/{a.rounds}: {name}")
                rates[name].append(images_per_sec(a.framework, workers, extra, a))
                console.log(f"round {r + 1} {name}: {rates[name][-1]:.1f} images/sec")
    medians = {name: statistics.median(v) for name, v in rates.items()}
    single = medians["1 worker"]
    table = Table(title=f"P2 {a.framework} (median of {a.rounds} rounds; target ≥ 0.90)")
    for column in ("variant", "images/sec", "per round", "efficiency"):
        table.add_column(column)
    for name, value in medians.items():
        workers = VARIANTS[name][0]
        rounds = ", ".join(f"{x:.1f}" for x in rates[name])
        table.add_row(name, f"{value:.1f}", rounds, f"{value / (workers * single):.2f}")
    console.print(table)
    plot(medians, a)
    console.print(f"chart: {OUT / 'p2_scaling.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
