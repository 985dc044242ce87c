"""P5: staging throughput against Azurite on loopback — `azdl data stage`'s uploader vs a
single-stream sequential upload of the same files, in the same run. Target: ≥ 3×.

    .venv/bin/python benchmarks/p5_staging.py [--files 16] [--file-mb 16] [--repeats 3]

Both sides upload the same shard-sized files of random bytes into fresh containers of one
in-memory Azurite. The baseline is the plain SDK call, one blob after another, one connection
(`upload_blob(max_concurrency=1)`). Ours is `azdl.staging.stage` with its defaults (4 files in
flight; files over 32 MiB as 8 MiB blocks, 4 at a time), including its local MD5 check and
transfer MD5s; its final verification listing is not timed. The two alternate, and the
median and best of each are printed (other processes share the CPU); the ratio of medians is
the figure. Writes a bar chart to out/benchmarks/p5_staging.png.
"""

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from azure.storage.blob import BlobServiceClient
from rich.console import Console

from azdl.azurite import running_azurite
from azdl.envs import REPO_ROOT
from azdl.staging import container_client, stage
from training.dataprep.manifest import Manifest, ShardEntry, SplitSummary, file_digests


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


def plot(base_mbs: float, ours_mbs: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    bars = ax.bar(
        ["single stream,\nsequential", "azdl data stage"],
        [base_mbs, ours_mbs],
        color=["#999999", "#2b6cb0"],
    )
    ax.bar_label(bars, fmt="%.0f MB/s")
    ax.set_ylabel("MB/s")
    ax.set_title(f"P5: staging to Azurite on loopback ({ours_mbs / base_mbs:.1f}×)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--file-mb", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="alternating runs of each")
    args = p.parse_args()
    total_mb = args.files * args.file_mb * 1024 * 1024 / 1e6
    with tempfile.TemporaryDirectory() as tmp, running_azurite() as azurite:
        folder = Path(tmp)
        manifest = write_files(folder, args.files, args.file_mb * 1024 * 1024)
        service = BlobServiceClient.from_connection_string(azurite.connection_string())
        base_s, ours_s = [], []
        for r in range(args.repeats):
            base_s.append(baseline(service, f"baseline{r}", folder, manifest))
            ours_s.append(ours(azurite.connection_string(), service, f"ours{r}", folder))
    base_mbs = total_mb / statistics.median(base_s)
    ours_mbs = total_mb / statistics.median(ours_s)
    print(
        f"P5 staging, {args.files} files × {args.file_mb} MiB = {total_mb:.0f} MB, Azurite "
        f"(in memory) on loopback, {os.cpu_count()} cores, {args.repeats} alternating runs each"
    )
    print(f"{'uploader':<38} {'median s':>8} {'MB/s':>7} {'best MB/s':>9}")
    for label, times in (
        ("single-stream sequential (baseline)", base_s),
        ("azdl data stage (4 files in flight)", ours_s),
    ):
        median = statistics.median(times)
        print(f"{label:<38} {median:>8.2f} {total_mb / median:>7.1f} {total_mb / min(times):>9.1f}")
    ratio = ours_mbs / base_mbs
    print(
        f"ratio of medians: {ratio:.2f}×, of bests: {min(base_s) / min(ours_s):.2f}× "
        f"(target ≥ 3×: {'met' if ratio >= 3 else 'NOT met'})"
    )
    chart = REPO_ROOT / "out" / "benchmarks" / "p5_staging.png"
    plot(base_mbs, ours_mbs, chart)
    print(f"chart: {chart.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
