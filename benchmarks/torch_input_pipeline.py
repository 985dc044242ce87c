"""The PyTorch flavour's CPU input pipeline alone: images/s per core at 224 px, beside the TF
flavours' tf.data pipeline measured in the same run on the same shards (the baseline).

    .venv-train/bin/python benchmarks/torch_input_pipeline.py [--images 512] [--batches 24]

Writes ImageNet-like JPEGs (training.data.prepare.sample: 300-500 px sides, photo-like grain),
converts them with the data tool (`azdl data prepare`'s converter), then times each pipeline in
a child process pinned to N cores (os.sched_setaffinity): tf.data (training.tensorflow.pipeline, its
decode pool sized to N) and training.torch.loader with N DataLoader worker processes (decode on
the CPU with libjpeg-turbo via simplejpeg, random-resized-crop, flip, normalise; the training
process shares the same cores). Both deliver normalised float32 NCHW/NHWC batches of 224 px.
images/CPU-s counts the CPU time of the child and all its worker processes: it shows the cost
per core even when other processes share the machine (on a loaded machine the wall-clock rates
can favour tf.data, whose several busy threads get more of a shared core than one process per
stage). A third row stops at the uint8 batches the workers make, which is all a GPU run does on
the CPU (it normalises on the GPU); a fourth makes the same batches letting libjpeg decode at any
n/8 scale (the old way, whose 5/8-7/8 scales decode slower than full size), the baseline of the
DCT-scale choice, and the run lists which scales the choice took for the same crops.
Results: benchmarks/results/torch_input_pipeline.{md,json}.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench_results import Figure, Run

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
NAME = "torch_input_pipeline"
TARGET = 300  # images/s per core (issue 13)
# The code its figures depend on (bench_results.Run adds every module these import): the PyTorch
# loader, the tf.data baseline, and the pinned libraries they run on (torch, simplejpeg, TF).
MEASURES = [
    "benchmarks/torch_input_pipeline.py",
    "training/torch/loader.py",
    "training/tensorflow/pipeline.py",
    "training/requirements.txt",
]


def _argv(data_dir: str, batch: int) -> list[str]:
    return [
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


def _cpu_seconds() -> float:
    """CPU time of this process and every live descendant (the DataLoader workers)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(child.cpu_times()[:2])
    return total


class _Raw:
    """A Finisher that hands the workers' uint8 NHWC batches on as they are."""

    device = SimpleNamespace(type="cpu")

    def __call__(self, item):
        return item["images"], item["labels"]


def child(pipeline: str, data_dir: str, cores: int, batch: int, batches: int, warmup: int):
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    from training.options import build_parser

    if pipeline == "tf":
        from training.tensorflow.pipeline import make_data

        args = build_parser("tf").parse_args(_argv(data_dir, batch))
        it = iter(make_data(args, rank=0, size=1, threads=cores).train)
    else:
        import torch

        from training.torch import loader

        torch.set_num_threads(1)
        args = build_parser("torch").parse_args(_argv(data_dir, batch))
        data = loader.TFRecordData(args, 0, 1, torch.device("cpu"), workers=cores)
        if pipeline == "torch":
            it = data.train_batches()
        else:  # "torch-uint8": what a GPU run's CPU side makes; normalising is the GPU's job
            dataset = data._dataset(data.train_split, True)
            if pipeline == "torch-uint8-any-scale":
                dataset.dct_factors = None
            it = loader.batches(dataset, range(10**9), workers=cores, prefetch=0, finish=_Raw())
    for _ in range(warmup):
        next(it)
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    for _ in range(batches):
        images, _ = next(it)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
    assert sorted(tuple(images.shape)) == sorted((batch, 224, 224, 3)), images.shape
    n = batch * batches
    print(json.dumps({"images_per_sec": n / seconds, "images_per_cpu_sec": n / cpu}))


def scale_shares(shards: Path, batches: int, batch: int) -> dict[str, float]:
    """Which decode scale the CPU path chose for the crops of `batches` training batches (the
    same windows the timed runs draw), as shares of the images."""
    import numpy as np
    import simplejpeg

    from training.data.records import image_record
    from training.data.shards import list_shards
    from training.data.tfrecord import read_file
    from training.torch import crops, jpeg_decode

    jpegs = [image_record(b).jpeg for s in list_shards(shards, "train") for b in read_file(s)]
    rng, counts = np.random.default_rng(0), {}
    for k in range(batches * batch):
        full = simplejpeg.decode_jpeg_header(jpegs[k % len(jpegs)])[:2]
        window = crops.random_windows([full[0]], [full[1]], rng)[0]
        factor = jpeg_decode.decode_scale(window, full, 224).get("min_factor", 1)
        counts[f"1/{factor}"] = counts.get(f"1/{factor}", 0) + 1
    return {scale: n / (batches * batch) for scale, n in sorted(counts.items())}


def _run_child(pipeline, shards, cores, args) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        pipeline,
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
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=512, help="train images in the sample set")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batches", type=int, default=24, help="timed batches per run")
    p.add_argument("--warmup", type=int, default=4, help="untimed batches first")
    p.add_argument("--cores", type=int, nargs="*", default=[1], help="core counts to measure")
    p.add_argument(
        "--child", nargs=3, metavar=("PIPELINE", "DATA_DIR", "CORES"), help=argparse.SUPPRESS
    )
    args = p.parse_args()
    if args.child:
        pipeline, data_dir, cores = args.child
        child(pipeline, data_dir, int(cores), args.batch, args.batches, args.warmup)
        return

    from training.data.prepare.convert import convert
    from training.data.prepare.sample import generate

    available = len(os.sched_getaffinity(0))
    cores = [c for c in args.cores if c <= available]
    run = Run(MEASURES)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source, shards = Path(tmp) / "jpeg", Path(tmp) / "tfrecords"
        generate(
            source, classes=8, train_per_class=args.images // 8, validation_per_class=0, size=400
        )
        manifest = convert(source, shards, ["train"], {"train": 8})
        count = manifest.splits["train"].num_examples
        mean_kb = manifest.total_bytes / count / 1e3
        shares = scale_shares(shards, args.batches, args.batch)
        for n in cores:
            for pipeline in ("tf", "torch", "torch-uint8", "torch-uint8-any-scale"):
                print(f"timing {pipeline} on {n} core(s)…", flush=True)
                rate = _run_child(pipeline, shards, n, args)
                rows.append({"pipeline": pipeline, "cores": n, **rate})
    for row in rows:
        old = next(
            r
            for r in rows
            if r["pipeline"] == "torch-uint8-any-scale" and r["cores"] == row["cores"]
        )
        row["vs_any_scale"] = row["images_per_cpu_sec"] / old["images_per_cpu_sec"]
        row["images_per_sec_per_core"] = row["images_per_sec"] / row["cores"]
        base = next(r for r in rows if r["pipeline"] == "tf" and r["cores"] == row["cores"])
        row["vs_tf_data"] = row["images_per_sec"] / base["images_per_sec"]
        row["cpu_vs_tf_data"] = row["images_per_cpu_sec"] / base["images_per_cpu_sec"]

    def worst(pipeline, key):
        return min(r[key] for r in rows if r["pipeline"] == pipeline)

    def verdict(rate):
        return "met" if rate >= TARGET else "NOT met"

    per_core = worst("torch", "images_per_sec_per_core")
    per_cpu_s = worst("torch", "images_per_cpu_sec")
    gpu_feed = worst("torch-uint8", "images_per_sec_per_core")
    gpu_feed_cpu_s = worst("torch-uint8", "images_per_cpu_sec")
    names = {
        "tf": "tf.data (TF flavours), normalised float",
        "torch": "torch_data (PyTorch), normalised float",
        "torch-uint8": "torch_data (PyTorch), uint8 as a GPU run ships it",
        "torch-uint8-any-scale": "the same, libjpeg at any n/8 scale (the old way)",
    }
    table = [
        [
            names[r["pipeline"]],
            r["cores"],
            f"{r['images_per_sec']:.0f}",
            f"{r['images_per_sec_per_core']:.0f}",
            f"{r['vs_tf_data']:.2f}×",
            f"{r['images_per_cpu_sec']:.0f}",
            f"{r['cpu_vs_tf_data']:.2f}×",
        ]
        for r in rows
    ]
    uint8 = [r for r in rows if r["pipeline"] == "torch-uint8"]
    scale_gain = min(r["vs_any_scale"] for r in uint8)
    chosen = ", ".join(f"{scale} {share:.0%}" for scale, share in shares.items())
    md = run.write(
        NAME,
        f"CPU input pipelines at 224 px: {count} JPEGs of 300-500 px ({mean_kb:.0f} kB mean) in "
        f"8 shards, batch {args.batch}, {args.batches} timed batches after {args.warmup}; "
        f"target ≥ {TARGET} images/s per core",
        ["pipeline", "cores", "images/s", "per core", "vs tf.data", "images/CPU-s", "vs tf.data"],
        table,
        notes=[
            f"PyTorch pipeline: wall clock {per_core:.0f} images/s per core ({verdict(per_core)}) "
            f"normalising on the CPU, {gpu_feed:.0f} ({verdict(gpu_feed)}) feeding a GPU; CPU "
            f"cost {per_cpu_s:.0f} ({verdict(per_cpu_s)}) and {gpu_feed_cpu_s:.0f} "
            f"({verdict(gpu_feed_cpu_s)}) images per CPU-second (the steadier figure on a shared "
            f"machine). Niceness {os.nice(0)}.",
            f"Decode scales chosen for the timed crops: {chosen} (1/1: full size). Against the "
            f"old way (any n/8 scale), measured in this run: {scale_gain:.2f}× the images per "
            "CPU-second for the uint8 batches a GPU run makes.",
        ],
        data={
            "dataset": {"images": count, "mean_kb": round(mean_kb, 1), "shards": 8},
            "rows": rows,
            "target_images_per_sec_per_core": TARGET,
            "torch_images_per_sec_per_core": per_core,
            "torch_images_per_cpu_sec": per_cpu_s,
            "torch_uint8_images_per_sec_per_core": gpu_feed,
            "torch_uint8_images_per_cpu_sec": gpu_feed_cpu_s,
            "decode_scale_shares": shares,
            "uint8_vs_any_scale_cpu": scale_gain,
        },
        figures={  # one timed run each
            "torch images/s per core": Figure(per_core, 1),
            "torch images per CPU-second": Figure(per_cpu_s, 1),
            "torch uint8 images/s per core": Figure(gpu_feed, 1),
        },
    )
    print(md.read_text())


if __name__ == "__main__":
    main()
