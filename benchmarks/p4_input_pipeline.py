"""P4: the training input pipeline on real JPEG TFRecords at 224 px — images/sec per CPU core,
on 1 core and on 2 cores. Target: ≥ 300 images/sec per core.

    .venv-train/bin/python benchmarks/p4_input_pipeline.py [--images 768] [--batches 40]

Writes a sample dataset of real JPEGs (ImageNet-like sizes, 300-500 px sides, photo-like
entropy) with `training.data.prepare`, converts it to TFRecords, then times the training-core
pipeline (`training.tensorflow.pipeline.make_data`: read, parse, decode + random-resized-crop, flip,
resize to 224, normalise, batch) in a child process pinned to N cores with
`os.sched_setaffinity` (TensorFlow sizes its thread pools from that). The 1-core run is the
baseline the 2-core figure is compared with. images/CPU-s (images per CPU-second the child
used) shows the pipeline's cost per core even when other processes share the machine.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # for every TensorFlow process started here
# The code its figures depend on (bench_results.Run adds every module these import).
MEASURES = [
    "benchmarks/p4_input_pipeline.py",
    "training/tensorflow/pipeline.py",
    "training/requirements.txt",
]


def child(data_dir: str, cores: int, batch: int, batches: int, warmup: int) -> None:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    from training.options import build_parser
    from training.tensorflow.pipeline import make_data

    argv = [
        "--data-dir",
        data_dir,
        "--image-size",
        "224",
        "--batch-size",
        str(batch),
        "--num-classes",
        "8",
        "--shuffle-buffer",
        "512",
    ]
    data = make_data(build_parser("tf").parse_args(argv), rank=0, size=1, threads=cores)
    it = iter(data.train)
    for _ in range(warmup):
        next(it)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(batches):
        images, _ = next(it)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert tuple(images.shape) == (batch, 224, 224, 3)
    n = batch * batches
    print(json.dumps({"images_per_sec": n / seconds, "images_per_cpu_sec": n / cpu}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=768, help="train images in the sample set")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batches", type=int, default=40, help="timed batches per run")
    p.add_argument("--warmup", type=int, default=5, help="untimed batches first")
    p.add_argument("--child", nargs=2, metavar=("DATA_DIR", "CORES"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.batch, args.batches, args.warmup)
        return

    from bench_results import Figure, Run

    from training.data.prepare.convert import convert
    from training.data.prepare.sample import generate

    run = Run(MEASURES)

    available = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        source, shards = Path(tmp) / "jpeg", Path(tmp) / "tfrecords"
        generate(
            source, classes=8, train_per_class=args.images // 8, validation_per_class=0, size=400
        )
        manifest = convert(source, shards, ["train"], {"train": 8})
        mean_kb = manifest.total_bytes / manifest.splits["train"].num_examples / 1e3
        rates = {}
        for cores in [c for c in (1, 2) if c <= available]:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                str(shards),
                str(cores),
                "--batch",
                str(args.batch),
                "--batches",
                str(args.batches),
                "--warmup",
                str(args.warmup),
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            rates[cores] = json.loads(out.strip().splitlines()[-1])

    print(
        f"P4 input pipeline, {manifest.splits['train'].num_examples} real JPEGs "
        f"(300-500 px, {mean_kb:.0f} kB each), 224 px, batch {args.batch}, "
        f"{args.batches} timed batches after {args.warmup}"
    )
    print(f"{'cores':>5} {'images/s':>9} {'per core':>9} {'vs 1 core':>9} {'images/CPU-s':>12}")
    for cores, r in rates.items():
        rate, base = r["images_per_sec"], rates[1]["images_per_sec"]
        print(
            f"{cores:>5} {rate:>9.1f} {rate / cores:>9.1f} {rate / base:>8.2f}× "
            f"{r['images_per_cpu_sec']:>12.1f}"
        )
    per_core = min(r["images_per_sec"] / cores for cores, r in rates.items())
    per_cpu_s = min(r["images_per_cpu_sec"] for r in rates.values())
    print(
        f"target ≥ 300 images/s per core: wall clock {per_core:.0f} "
        f"({'met' if per_core >= 300 else 'NOT met'}), CPU cost {per_cpu_s:.0f} images per "
        f"CPU-second ({'met' if per_cpu_s >= 300 else 'NOT met'})"
    )
    if available < 2:
        print("only 1 core available: no 2-core figure")
    base = rates[1]["images_per_sec"]
    run.write(
        "p4_input_pipeline",
        f"P4, input pipeline: {manifest.splits['train'].num_examples} real JPEGs "
        f"(300-500 px, {mean_kb:.0f} kB each) → 224 px, batch {args.batch}, {args.batches} timed "
        f"batches after {args.warmup}; target ≥ 300 images/s per core",
        ["cores", "images/s", "per core", "vs 1 core", "images per CPU-second"],
        [
            [
                c,
                f"{r['images_per_sec']:.1f}",
                f"{r['images_per_sec'] / c:.1f}",
                f"{r['images_per_sec'] / base:.2f}×",
                f"{r['images_per_cpu_sec']:.1f}",
            ]
            for c, r in rates.items()
        ],
        notes=[
            f"Target ≥ 300 images/s per core: wall clock {per_core:.0f} "
            f"({'met' if per_core >= 300 else 'NOT met'}), CPU cost {per_cpu_s:.0f} images per "
            f"CPU-second ({'met' if per_cpu_s >= 300 else 'NOT met'})."
        ],
        data={"rates": {str(c): r for c, r in rates.items()}},
        figures={  # one timed run each
            f"{c} core{'s' if c > 1 else ''}, per core": Figure(r["images_per_sec"] / c, 1)
            for c, r in rates.items()
        },
    )


if __name__ == "__main__":
    main()
