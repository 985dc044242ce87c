"""Conversion throughput: `azdl data prepare` on the sample dataset, in images/sec, with one
worker process (the baseline, measured in the same run) and with one per core.

    .venv-train/bin/python benchmarks/conversion.py [--per-class 80] [--size 400]

The sample set is written by `training.data.prepare.sample` (real JPEGs, ImageNet-like sizes by
default, 8 classes, plus a PNG named .JPEG and a CMYK JPEG that must be re-encoded). Each run
converts train and validation into fresh shards; the time includes starting the workers.
images/CPU-s (images per CPU-second of the process and its workers, TensorFlow start-up
included) does not depend on what else the machine runs; images/s does.
"""

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from training.data.prepare.convert import convert
from training.data.prepare.sample import generate

# The code its figures depend on (bench_results.Run adds every module these import).
MEASURES = [
    "benchmarks/conversion.py",
    "training/data/prepare/convert.py",
    "training/requirements.txt",
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-class", type=int, default=80, help="train images per class (8 classes)")
    p.add_argument("--size", type=int, default=400, help="typical image side in pixels")
    args = p.parse_args()
    from bench_results import Run

    run = Run(MEASURES)
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "sample"
        counts = generate(
            source,
            classes=8,
            train_per_class=args.per_class,
            validation_per_class=args.per_class // 8,
            size=args.size,
            messy=True,
        )
        images = sum(counts.values())
        rates, cpu_rates = {}, {}
        for workers in sorted({1, cores}):
            start, cpu_start = time.perf_counter(), _cpu_seconds()
            convert(
                source,
                Path(tmp) / f"out{workers}",
                ["train", "validation"],
                {"train": 16, "validation": 4},
                workers=workers,
            )
            rates[workers] = images / (time.perf_counter() - start)
            cpu_rates[workers] = images / (_cpu_seconds() - cpu_start)
    print(f"conversion of the sample set: {images} real JPEGs, ~{args.size} px, 16 + 4 shards")
    print(f"{'workers':>7} {'images/s':>9} {'vs 1 worker':>11} {'images/CPU-s':>12}")
    for workers, rate in rates.items():
        print(f"{workers:>7} {rate:>9.1f} {rate / rates[1]:>10.2f}× {cpu_rates[workers]:>12.1f}")
    run.write(
        "conversion",
        f"Conversion (azdl data prepare): {images} real JPEGs of ~{args.size} px (sample "
        "generator, with a PNG and a CMYK file), 16 + 4 shards",
        ["workers", "images/s", "vs 1 worker", "images per CPU-second"],
        [[w, f"{r:.1f}", f"{r / rates[1]:.2f}×", f"{cpu_rates[w]:.1f}"] for w, r in rates.items()],
        notes=["The CPU figure includes starting TensorFlow in each worker process."],
        data={"rates": rates, "cpu_rates": cpu_rates},
    )


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the pool's workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
