"""P1: our Keras and TF-loop scripts against Horovod's own Keras synthetic benchmark, side by side.

    .venv/bin/python benchmarks/p1_vs_horovod.py             # 224 px, batch 32, 4 × 5 batches
    .venv/bin/python benchmarks/p1_vs_horovod.py --num-iters 10 --num-batches-per-iter 10
                                                             # the original's full length
    .venv/bin/python benchmarks/p1_vs_horovod.py --image-size 32 --batch-size 2 \
        --num-iters 2 --num-batches-per-iter 2 --rounds 1    # a smoke run (a minute)

All three run with the same workers (horovodrun --gloo), model (ResNet50, random weights),
image size and batch per worker (by default the original's 224 px and 32), synthetic data and
step count; plain SGD. The default length, 4 iterations of 5 batches instead of 10 × 10, keeps a
run to a few minutes on 2 cores. The baseline is benchmarks/p1_horovod_baseline.py (Horovod's
script re-implemented, see there).

Both sides are timed the same way, by the wall clock over whole iterations, the first left
out: the baseline as Horovod's script does (batch × batches / iteration time, the mean over
iterations, × workers); ours run `--steps-per-epoch = --num-batches-per-iter` with the first
iteration's steps as timing warm-up, and their rate here is `images_timed / timed_span_s` from
the throughput line (the wall time from the first timed step's begin to the last one's end,
so the gaps between steps and at epoch ends count against us; the line's `images_per_sec`
sums step times only). One difference is the reference's own and stays: it re-batches its
cached images every step (a copy of one batch), ours serve one fixed batch.

Variants are interleaved round by round, so load from elsewhere on the machine hits all of them
alike; the median over rounds is reported. Target: ours / baseline ≥ 1.0. Writes a bar chart to
benchmarks/results/p1_vs_horovod.png.
"""

import argparse
import json
import statistics
import subprocess
import sys

from rich.console import Console
from rich.table import Table

from azdl.envs import PACKAGES_ROOT, training_bin, training_env
from azdl.local import launch_command
from training.throughput import parse_throughput_lines

OUT = PACKAGES_ROOT / "benchmarks" / "results"  # charts beside the results files the docs show
# The code its figures depend on (bench_results.Run adds every module these import): the
# baseline, our two TF scripts as the launcher starts them, the pinned libraries and Horovod's
# build (its flags are in setup-training.sh).
MEASURES = [
    "benchmarks/p1_vs_horovod.py",
    "benchmarks/p1_horovod_baseline.py",
    "training/tensorflow/train_keras.py",
    "training/tensorflow/train_loop.py",
    "training/requirements.txt",
    "training/install/setup-training.sh",
]


def baseline_command(a) -> list[str]:
    w = str(a.workers)
    return [
        str(training_bin("horovodrun")), "--gloo", "-np", w, "-H", f"localhost:{w}",
        str(training_bin("python")), str(PACKAGES_ROOT / "benchmarks" / "p1_horovod_baseline.py"),
        "--image-size", str(a.image_size), "--batch-size", str(a.batch_size),
        "--num-classes", str(a.num_classes), "--num-iters", str(a.num_iters),
        "--num-batches-per-iter", str(a.num_batches_per_iter),
    ]  # fmt: skip


def ours_command(framework: str, a) -> list[str]:
    lr = 0.01 * 256 / (a.batch_size * a.workers)  # the baseline's SGD(0.01), in our scaling
    return launch_command(framework, a.workers, "horovod", [
        "--model", "resnet50", "--image-size", str(a.image_size),
        "--num-classes", str(a.num_classes), "--batch-size", str(a.batch_size),
        "--epochs", str(a.num_iters), "--steps-per-epoch", str(a.num_batches_per_iter),
        "--timing-warmup-steps", str(a.num_batches_per_iter),
        "--base-lr", f"{lr:.6g}", "--momentum", "0", "--warmup-epochs", "0", "--lr-decay", "none",
    ])  # fmt: skip


def images_per_sec(cmd: list[str]) -> float:
    env = training_env({"TF_CPP_MIN_LOG_LEVEL": "2"})
    proc = subprocess.run(cmd, cwd=PACKAGES_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: benchmark run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    for line in proc.stdout.splitlines():
        if "baseline_images_per_sec" in line:
            return json.loads(line[line.index("{") :])["baseline_images_per_sec"]
    (record,) = parse_throughput_lines(proc.stdout)
    return record["images_timed"] / record["timed_span_s"]  # wall clock, as the baseline


def plot(medians: dict[str, float], a) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(list(medians), list(medians.values()), color=["grey", "tab:blue", "tab:orange"])
    ax.set_ylabel("images/sec (all workers)")
    ax.set_title(f"P1: ResNet50 {a.image_size}px, batch {a.batch_size}×{a.workers}, CPU")
    fig.tight_layout()
    fig.savefig(OUT / "p1_vs_horovod.png", dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--num-iters", type=int, default=4)
    p.add_argument("--num-batches-per-iter", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    if a.num_iters < 2:
        p.error(f"--num-iters must be at least 2 (the first is warm-up), got {a.num_iters}")
    from bench_results import Figure, Run

    run = Run(MEASURES)
    console = Console()
    variants = {
        "horovod baseline": baseline_command(a),
        "ours: keras": ours_command("keras", a),
        "ours: tf loop": ours_command("tf", a),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    with console.status("running") as status:
        for r in range(a.rounds):
            for name, cmd in variants.items():
                status.update(f"round {r + 1}/{a.rounds}: {name}")
                rates[name].append(images_per_sec(cmd))
                console.log(f"round {r + 1} {name}: {rates[name][-1]:.1f} images/sec")
    medians = {name: statistics.median(v) for name, v in rates.items()}
    base = medians["horovod baseline"]
    settings = (
        f"ResNet50 {a.image_size} px, batch {a.batch_size} × {a.workers} workers, "
        f"{a.num_iters} × {a.num_batches_per_iter} batches"
    )
    table = Table(title=f"P1: {settings} (median of {a.rounds} rounds; target: ratio ≥ 1.00)")
    for column in ("variant", "images/sec", "per round", "ratio to baseline"):
        table.add_column(column)
    for name, value in medians.items():
        rounds = ", ".join(f"{x:.1f}" for x in rates[name])
        table.add_row(name, f"{value:.1f}", rounds, f"{value / base:.2f}")
    console.print(table)
    plot(medians, a)
    console.print(f"chart: {OUT / 'p1_vs_horovod.png'}")
    run.write(
        "p1_vs_horovod",
        f"P1, ours vs Horovod's Keras synthetic benchmark: {settings}; median of {a.rounds} "
        "rounds; target: ratio ≥ 1.00",
        ["variant", "images/sec", "per round", "ratio to baseline"],
        [
            [
                name,
                f"{value:.1f}",
                ", ".join(f"{x:.1f}" for x in rates[name]),
                f"{value / base:.2f}",
            ]
            for name, value in medians.items()
        ],
        data={"rates": rates},
        figures={  # ratio of medians
            name: Figure(value / base, a.rounds) for name, value in medians.items()
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
