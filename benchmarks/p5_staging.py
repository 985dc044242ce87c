"""P5: staging throughput against Azurite on loopback — `azdl data stage`'s uploader vs a
single-stream sequential upload of the same files, in the same run. Target: ≥ 3×.

    .venv/bin/python benchmarks/p5_staging.py [--sets 16x16,4x128] [--repeats 3]

Each set (FILESxMiB) is measured on its own: by default 16 files of 16 MiB, which go up in
one request each, and 4 of 128 MiB, which go up as 8 MiB blocks (over the 32 MiB single-request
limit). Both sides upload the same files of random bytes into fresh containers of one
in-memory Azurite. The baseline is the plain SDK call, one blob after another, one connection
(`upload_blob(max_concurrency=1)`). Ours is `azdl.staging.stage` with its defaults (4 files in
flight; blocks 4 at a time per file), including its MD5 check of every local file (hashed as
it is read for the upload) and the blocks' transfer MD5s; its final verification listing is
not timed. The two alternate, and the median and best of each are printed (other processes
share the CPU); the ratio of medians is the figure. Writes a bar chart per set to
benchmarks/results/p5_staging.png.
"""

import argparse
import io
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from azure.storage.blob import BlobServiceClient
from rich.console import Console

from azdl.azurite import running_azurite
from azdl.envs import PACKAGES_ROOT
from azdl.staging import SINGLE_PUT_MAX, container_client, stage
from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary, file_digests

# The code its figures depend on (bench_results.Run adds every module these import): the
# uploader, the emulator and the pinned SDK and Azurite versions.
MEASURES = [
    "benchmarks/p5_staging.py",
    "azdl/staging.py",
    "requirements.txt",
    "package.json",
    "package-lock.json",
]


def write_files(folder: Path, count: int, size: int) -> Manifest:
    entries = []
    for i in range(count):
        path = folder / f"train-{i:05d}-of-{count:05d}"
        path.write_bytes(os.urandom(size))
        entries.append(ShardEntry(path.name, "train", 1, *file_digests(path)))
    summary = SplitSummary(count, count, {"n00000001": count})
    manifest = Manifest({"n00000001": 0}, {"train": summary}, entries)
    manifest.write(folder)
    return manifest


def baseline(service: BlobServiceClient, name: str, folder: Path, manifest: Manifest) -> float:
    """Seconds for a single-stream sequential upload of every file."""
    container = service.create_container(name)
    start = time.perf_counter()
    for entry in manifest.shards:
        with open(folder / entry.name, "rb") as data:
            container.upload_blob(entry.name, data, overwrite=True, max_concurrency=1)
    seconds = time.perf_counter() - start
    container.delete_container()
    return seconds


def ours(connection_string: str, service, name: str, folder: Path) -> float:
    service.create_container(name)
    report = stage(
        folder, container_client(name, None, connection_string), console=Console(file=io.StringIO())
    )
    if not report.ok:
        sys.exit(f"our upload failed verification: {report}")
    service.delete_container(name)
    return report.seconds


def plot(results: list[tuple[str, float, float]], path: Path) -> None:
    """One pair of bars (baseline, ours) per set: (label, baseline MB/s, our MB/s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), squeeze=False)
    for ax, (label, base_mbs, ours_mbs) in zip(axes[0], results, strict=True):
        bars = ax.bar(
            ["single stream,\nsequential", "azdl data stage"],
            [base_mbs, ours_mbs],
            color=["#999999", "#2b6cb0"],
        )
        ax.bar_label(bars, fmt="%.0f MB/s")
        ax.set_ylabel("MB/s")
        ax.set_title(f"{label}: {ours_mbs / base_mbs:.1f}×", fontsize=10)
    fig.suptitle("P5: staging to Azurite on loopback")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def parse_sets(text: str) -> list[tuple[int, int]]:
    """'16x16,4x128' -> [(16, 16), (4, 128)]: (files, MiB per file)."""
    sets = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", item)
        if not m or int(m[1]) < 1 or int(m[2]) < 1:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not FILESxMIB (e.g. 16x16); give comma-separated sets like "
                "16x16,4x128 with at least 1 file of at least 1 MiB"
            )
        sets.append((int(m[1]), int(m[2])))
    return sets


def measure(azurite, files: int, mib: int, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of each baseline and each of our uploads of `files` × `mib` MiB."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest = write_files(folder, files, mib * 1024 * 1024)
        service = BlobServiceClient.from_connection_string(azurite.connection_string())
        base_s, ours_s = [], []
        for r in range(repeats):
            tag = f"{files}x{mib}r{r}"
            base_s.append(baseline(service, f"baseline{tag}", folder, manifest))
            ours_s.append(ours(azurite.connection_string(), service, f"ours{tag}", folder))
    return base_s, ours_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sets",
        type=parse_sets,
        default=parse_sets("16x16,4x128"),
        help="comma-separated FILESxMIB sets, each measured on its own (default 16x16,4x128: "
        "one request per file, and 8 MiB blocks)",
    )
    p.add_argument("--repeats", type=int, default=3, help="alternating runs of each")
    args = p.parse_args()
    if args.repeats < 1:
        p.error(f"--repeats must be at least 1, got {args.repeats}")
    from bench_results import Figure, Run

    run, rows, figures = Run(MEASURES), [], {}
    results = []
    print(
        f"P5 staging, Azurite (in memory) on loopback, {os.cpu_count()} cores, "
        f"{args.repeats} alternating runs each"
    )
    print(f"{'files':<30} {'uploader':<38} {'median s':>8} {'MB/s':>7} {'best MB/s':>9}")
    with running_azurite() as azurite:
        for files, mib in args.sets:
            base_s, ours_s = measure(azurite, files, mib, args.repeats)
            total_mb = files * mib * 1024 * 1024 / 1e6
            how = "8 MiB blocks" if mib * 1024 * 1024 > SINGLE_PUT_MAX else "one request each"
            label = f"{files} × {mib} MiB ({how})"
            for uploader, times in (
                ("single-stream sequential (baseline)", base_s),
                ("azdl data stage (4 files in flight)", ours_s),
            ):
                median = statistics.median(times)
                print(
                    f"{label:<30} {uploader:<38} {median:>8.2f} {total_mb / median:>7.1f} "
                    f"{total_mb / min(times):>9.1f}"
                )
            ratio = statistics.median(base_s) / statistics.median(ours_s)
            print(
                f"{label:<30} ratio of medians: {ratio:.2f}×, of bests: "
                f"{min(base_s) / min(ours_s):.2f}× (target ≥ 3×: "
                f"{'met' if ratio >= 3 else 'NOT met'})"
            )
            figures[label] = Figure(ratio, args.repeats)
            results.append(
                (label, total_mb / statistics.median(base_s), total_mb / statistics.median(ours_s))
            )
            rows.append(
                [
                    label,
                    f"{total_mb / statistics.median(base_s):.1f} ({total_mb / min(base_s):.1f})",
                    f"{total_mb / statistics.median(ours_s):.1f} ({total_mb / min(ours_s):.1f})",
                    f"{ratio:.2f}× ({min(base_s) / min(ours_s):.2f}×)",
                ]
            )
    chart = PACKAGES_ROOT / "benchmarks" / "results" / "p5_staging.png"
    plot(results, chart)
    print(f"chart: {chart.relative_to(PACKAGES_ROOT)}")
    run.write(
        "p5_staging",
        f"P5, staging: azdl data stage vs a single-stream sequential upload to Azurite (in "
        f"memory) on loopback, MB/s, median (best) of {args.repeats} alternating runs; "
        "target ≥ 3×",
        ["files", "single stream", "azdl data stage", "ratio"],
        rows,
        data={"sets": [list(x) for x in results]},
        figures=figures,  # the ratio of medians per set
    )


if __name__ == "__main__":
    main()
