"""ImageNet-layout folders to sharded TFRecords in the schema of `training.data.records`.

    azdl data prepare --input IMAGENET --output SHARDS [--train-shards 1024 ...]

Checks everything before writing, writes with one process per core into a hidden folder and
moves the shards into place only when the run succeeds (docs/architecture.md, "Conversion").
"""

import argparse
import dataclasses
import io
import multiprocessing
import multiprocessing.queues
import os
import queue
import random
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from training.data.prepare.manifest import (
    MANIFEST_NAME,
    SHARD_FILE,
    Manifest,
    ShardEntry,
    SplitSummary,
    file_digests,
)
from training.data.prepare.options import DEFAULT_SHARDS, PREPARE_OPTIONS, add_options
from training.data.prepare.sample import LABELS_FILE
from training.data.records import serialize_example
from training.data.shards import SPLITS, shard_name
from training.data.tfrecord import RecordWriter
from training.errors import TrainingError

IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png"}
# The smallest --max-size: training.options' smallest --image-size (a cap below the run's
# --image-size, 224 by default, makes every crop an upscaled one: docs/data.md).
MIN_MAX_SIZE = 32
LOG_EVERY_S = 10.0  # progress lines when stdout is not a terminal (job logs, CI)


@dataclass(frozen=True)
class Encoding:
    reencode: bool = False
    quality: int = 90
    resize: int | None = None  # the shorter side at most this many pixels
    max_size: int | None = None  # the longer side at most this many pixels


@dataclass(frozen=True)
class ShardTask:
    split: str
    index: int
    total: int
    images: list[tuple[str, str]]  # (path, wnid)
    label_map: dict[str, int]
    folder: str
    encoding: Encoding


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _class_folders(split_dir: Path) -> dict[str, list[Path]]:
    folders = {d.name: _images_in(d) for d in sorted(split_dir.iterdir()) if d.is_dir()}
    empty = [name for name, images in folders.items() if not images]
    if empty:
        raise TrainingError(
            f"{len(empty)} empty class folder(s) in {split_dir}: {', '.join(empty)}; every class "
            f"folder needs at least one image ({', '.join(sorted(IMAGE_SUFFIXES))}); remove them"
        )
    loose = _images_in(split_dir) if folders else []
    if loose:
        raise TrainingError(
            f"{split_dir} holds class folders and also {len(loose)} image(s) outside them, "
            f"which would be left out: {', '.join(p.name for p in loose[:10])}"
            f"{' …' if len(loose) > 10 else ''}; move them into their class folders (or, for "
            "validation, remove the folders and label the images with --validation-labels)"
        )
    return folders


def read_validation_labels(path: Path) -> tuple[dict[str, str], list[str]]:
    """({file name or stem: wnid}, [wnids in order]) from a labels file.

    Lines are `<file> <wnid>` (space or comma; Kaggle's `ImageId,<wnid> x y …` CSV fits, its
    header is skipped) or a bare wnid per line, in the order of the sorted file names (the
    classic `imagenet_2012_validation_synset_labels.txt`).
    """
    by_name: dict[str, str] = {}
    ordered: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        tokens = [t for t in re.split(r"[,\s]+", line.strip()) if t]
        if not tokens or tokens[0].startswith("#") or tokens[0] == "ImageId":
            continue
        if len(tokens) == 1:
            ordered.append(tokens[0])
        else:
            by_name[tokens[0]] = tokens[1]
        if by_name and ordered:
            raise TrainingError(
                f"{path}:{number} mixes the two label formats; use either '<file> <wnid>' on "
                "every line or one wnid per line"
            )
    return by_name, ordered


def scan(
    source: Path, splits: list[str], labels_file: Path | None
) -> tuple[dict[str, int], dict[str, list[tuple[str, str]]]]:
    """The label map and, per split, every (image path, wnid): all input checks, no output."""
    if source.is_file():
        raise TrainingError(
            f"--input {source} is a file; give the folder that holds train/ and validation/ "
            "(ImageNet's layout: train/<wnid>/*.JPEG)"
        )
    if not source.is_dir():
        raise TrainingError(f"input folder {source} does not exist")
    for split in splits:
        if not (source / split).is_dir():
            present = sorted(d.name for d in source.iterdir() if d.is_dir())
            raise TrainingError(
                f"split {split!r} is missing: no folder {source / split} (found: "
                f"{', '.join(present) or 'nothing'}); convert only the splits you have with "
                f"--splits {','.join(s for s in splits if s != split) or 'train'}"
            )
    images: dict[str, list[tuple[str, str]]] = {}
    if "train" in splits:
        folders = _class_folders(source / "train")
        if not folders:
            raise TrainingError(f"{source / 'train'} has no class folders (train/<wnid>/*.JPEG)")
        images["train"] = [(str(p), wnid) for wnid, paths in folders.items() for p in paths]
    if "validation" in splits:
        images["validation"] = _validation_images(source / "validation", labels_file)
    wnids = {wnid for items in images.values() for _, wnid in items}
    train_wnids = {wnid for _, wnid in images.get("train", [])}
    if train_wnids and wnids - train_wnids:
        unknown = ", ".join(sorted(wnids - train_wnids)[:10])
        raise TrainingError(f"validation classes not among the train classes: {unknown}")
    label_map = {wnid: index for index, wnid in enumerate(sorted(wnids))}
    return label_map, images


def _validation_images(folder: Path, labels_file: Path | None) -> list[tuple[str, str]]:
    folders = _class_folders(folder)
    if folders:
        return [(str(p), wnid) for wnid, paths in folders.items() for p in paths]
    files = _images_in(folder)
    if not files:
        raise TrainingError(f"{folder} holds no images and no class folders")
    labels_file = labels_file or folder.parent / LABELS_FILE
    if not labels_file.is_file():
        raise TrainingError(
            f"{folder} holds images without class folders, so they need a labels file: "
            f"--validation-labels FILE (not found: {labels_file})"
        )
    by_name, ordered = read_validation_labels(labels_file)
    if ordered:
        if len(ordered) != len(files):
            raise TrainingError(
                f"{labels_file} lists {len(ordered)} labels in file order but {folder} holds "
                f"{len(files)} images; the counts must match"
            )
        return [(str(p), wnid) for p, wnid in zip(files, ordered, strict=True)]
    missing = [p.name for p in files if p.name not in by_name and p.stem not in by_name]
    if missing:
        raise TrainingError(
            f"{len(missing)} validation image(s) have no label in {labels_file}: "
            f"{', '.join(missing[:10])}{' …' if len(missing) > 10 else ''}"
        )
    return [(str(p), by_name.get(p.name) or by_name[p.stem]) for p in files]


def encode_image(path: str, encoding: Encoding) -> tuple[bytes, int, int, str | None]:
    """(JPEG bytes, height, width, why it was re-encoded or None). Raises on unreadable files.

    The image is fully decoded, so truncated files are caught here, not during training. It is
    read once and opened from memory, so Pillow's "cannot identify image file" names the
    in-memory buffer: the error names the file instead.
    """
    from PIL import Image, UnidentifiedImageError

    data = Path(path).read_bytes()
    buffer = io.BytesIO(data)
    try:
        opened = Image.open(buffer)
    except UnidentifiedImageError:
        raise UnidentifiedImageError(
            f"not an image Pillow can read ({len(data)} bytes; begins {data[:8]!r})"
        ) from None
    with opened as image:
        image.load()
        reason = None
        if image.format != "JPEG":
            reason = f"{image.format} file named {Path(path).suffix}"
        elif image.mode not in ("RGB", "L"):
            reason = f"{image.mode} JPEG"
        scale = _scale(image.size, encoding)
        if not (reason or scale < 1 or encoding.reencode):
            return data, image.height, image.width, None
        rgb = image.convert("RGB")
    if scale < 1:
        size = (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale)))
        rgb = rgb.resize(size, Image.Resampling.BICUBIC)
    out = io.BytesIO()
    rgb.save(out, "JPEG", quality=encoding.quality)
    return out.getvalue(), rgb.height, rgb.width, reason


def _scale(size: tuple[int, int], encoding: Encoding) -> float:
    """The factor (at most 1) that brings the shorter side within --resize and the longer side
    within --max-size."""
    limits = [(min(size), encoding.resize), (max(size), encoding.max_size)]
    return min([1.0] + [limit / side for side, limit in limits if limit is not None])


_progress: multiprocessing.queues.Queue | None = None  # set in the conversion's worker processes


def _init_worker(progress: multiprocessing.queues.Queue) -> None:
    global _progress
    _progress = progress


def write_shard(task: ShardTask) -> dict:
    """Write one shard; return its manifest entry plus what was re-encoded or unreadable.

    In a conversion's worker, every image done is counted on the parent's progress queue.
    """
    from PIL import Image

    name = shard_name(task.split, task.index, task.total)
    path = Path(task.folder) / name
    counts: Counter[str] = Counter()
    reencoded, bad = [], []
    with RecordWriter(str(path)) as writer:
        for image_path, wnid in task.images:
            try:
                data, height, width, reason = encode_image(image_path, task.encoding)
            except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
                bad.append({"path": image_path, "error": f"{type(exc).__name__}: {exc}"})
                if _progress is not None:
                    _progress.put(1)
                continue
            if reason:
                reencoded.append({"path": image_path, "reason": reason})
            label = task.label_map[wnid]
            writer.write(serialize_example(data, label, height, width, Path(image_path).name))
            counts[wnid] += 1
            if _progress is not None:
                _progress.put(1)
    size, md5, sha256 = file_digests(path)
    entry = ShardEntry(name, task.split, sum(counts.values()), size, md5, sha256)
    return {"entry": entry, "counts": counts, "reencoded": reencoded, "bad": bad}


def existing_outputs(output: Path) -> list[Path]:
    if not output.is_dir():
        return []
    return sorted(
        p for p in output.iterdir() if SHARD_FILE.match(p.name) or p.name == MANIFEST_NAME
    )


def convert(
    source: Path,
    output: Path,
    splits: list[str],
    shards: dict[str, int | None],
    encoding: Encoding = Encoding(),
    labels_file: Path | None = None,
    workers: int | None = None,
    skip_bad: bool = False,
    overwrite: bool = False,
    seed: int = 0,
) -> Manifest:
    """Convert `source` into shards and `manifest.json` in `output`; return the manifest.

    A split's shard count of None takes the default (`DEFAULT_SHARDS`), or one shard per image
    when the split has fewer images than that."""
    unknown = [s for s in splits if s not in SPLITS]
    if unknown or not splits:
        raise TrainingError(f"unknown split(s) {unknown or splits}; allowed: {', '.join(SPLITS)}")
    if output.exists() and not output.is_dir():
        raise TrainingError(f"--output {output} is a file; give a folder for the shards")
    old = existing_outputs(output)
    if old and not overwrite:
        raise TrainingError(
            f"{output} already holds {len(old)} shard/manifest file(s) (e.g. {old[0].name}); "
            "pass --overwrite to replace them, or choose another --output"
        )
    label_map, images = scan(source, splits, labels_file)
    tasks_per_split = {}
    rng = random.Random(seed)
    for split in splits:
        items, total = images[split], shards[split]
        if total is None:
            total = max(1, min(DEFAULT_SHARDS[split], len(items)))
        if not 1 <= total <= len(items):
            leave_out = "" if shards[split] is None else f", or leave --{split}-shards out"
            raise TrainingError(
                f"--{split}-shards {total} is not possible with {len(items)} {split} images; "
                f"allowed: 1 to {len(items)}{leave_out}"
            )
        rng.shuffle(items)  # mix the classes across shards
        tasks_per_split[split] = [
            items[i * len(items) // total : (i + 1) * len(items) // total] for i in range(total)
        ]

    output.mkdir(parents=True, exist_ok=True)
    staging = output / f".partial-{os.getpid()}"
    staging.mkdir()
    tasks = [
        ShardTask(split, i, len(chunks), chunk, label_map, str(staging), encoding)
        for split, chunks in tasks_per_split.items()
        for i, chunk in enumerate(chunks)
    ]
    # The cores this process may run on (a container's or taskset's share), not the machine's.
    workers = max(1, min(workers or len(os.sched_getaffinity(0)), len(tasks)))
    results = []
    try:
        results = _run_tasks(tasks, workers, sum(len(v) for v in images.values()))
        bad = [b for r in results for b in r["bad"]]
        if bad and not skip_bad:
            listing = "\n".join(f"  {b['path']}: {b['error']}" for b in bad)
            raise TrainingError(
                f"{len(bad)} unreadable image(s); nothing was written to {output}:\n{listing}\n"
                "fix or remove them, or pass --skip-bad to leave them out (the manifest lists them)"
            )
        shards_written = without_empty_shards(results, staging, splits)
        for path in old:
            path.unlink()
        for r in shards_written:
            (staging / r["entry"].name).replace(output / r["entry"].name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    entries = sorted((r["entry"] for r in shards_written), key=lambda e: e.name)
    summaries = {}
    for split in splits:
        counts = sum((r["counts"] for r in shards_written if r["entry"].split == split), Counter())
        shards_of_split = sum(1 for e in entries if e.split == split)
        summaries[split] = SplitSummary(
            sum(counts.values()), shards_of_split, dict(sorted(counts.items()))
        )
    manifest = Manifest(
        label_map=label_map,
        splits=summaries,
        shards=entries,
        reencoded=sorted((x for r in results for x in r["reencoded"]), key=lambda x: x["path"]),
        skipped=sorted((x for r in results for x in r["bad"]), key=lambda x: x["path"]),
        options=dict(
            source=str(source),
            shards={split: summaries[split].num_shards for split in splits},
            reencode=encoding.reencode,
            quality=encoding.quality,
            resize=encoding.resize,
            max_size=encoding.max_size,
            seed=seed,
        ),
    )
    manifest.write(output)
    return manifest


def without_empty_shards(results: list[dict], staging: Path, splits: list[str]) -> list[dict]:
    """The results without shards whose every image was skipped (their files deleted), the
    others renamed in `staging` to number 0..n-1 of the n left, so names and counts agree."""
    kept = []
    for split in splits:
        ours = sorted(
            (r for r in results if r["entry"].split == split), key=lambda r: r["entry"].name
        )
        full = [r for r in ours if r["entry"].num_examples]
        if not full:
            raise TrainingError(f"every {split} image is unreadable; nothing was written")
        for r in ours:
            if not r["entry"].num_examples:
                (staging / r["entry"].name).unlink()
        for index, r in enumerate(full):
            name = shard_name(split, index, len(full))
            if name != r["entry"].name:
                (staging / r["entry"].name).rename(staging / name)
            kept.append(r | {"entry": dataclasses.replace(r["entry"], name=name)})
    return kept


def _run_tasks(tasks: list[ShardTask], workers: int, total_images: int) -> list[dict]:
    """Run the shard tasks in `workers` processes, showing progress image by image: a bar on a
    terminal, else a plain line every LOG_EVERY_S seconds."""
    from rich.progress import MofNCompleteColumn, Progress, TimeRemainingColumn

    # spawn, not fork: TensorFlow must not be inherited half-initialised by the workers.
    context = multiprocessing.get_context("spawn")
    progress_queue = context.Queue()
    columns = [*Progress.get_default_columns()[:2], MofNCompleteColumn(), TimeRemainingColumn()]
    terminal = sys.stdout.isatty()
    start = last_line = time.monotonic()
    done = 0
    with (
        Progress(*columns, disable=not terminal) as progress,
        context.Pool(workers, _init_worker, (progress_queue,)) as pool,
    ):
        bar = progress.add_task(f"converting ({workers} workers)", total=total_images)
        pending = pool.map_async(write_shard, tasks)
        give_up = None  # a task failed: wait a moment for counts in flight, then report it
        while done < total_images:
            try:
                progress_queue.get(timeout=0.2)
            except queue.Empty:
                if pending.ready():
                    give_up = give_up or time.monotonic() + 1.0
                    if time.monotonic() > give_up:
                        break
                continue
            done += 1
            progress.advance(bar)
            now = time.monotonic()
            if not terminal and (now - last_line >= LOG_EVERY_S or done == total_images):
                rate = done / max(now - start, 1e-9)
                print(f"converted {done}/{total_images} images ({rate:.1f}/s)", flush=True)
                last_line = now
        return pending.get()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="azdl data prepare",
        description="Convert an ImageNet-layout folder into sharded TFRecords (the schema of "
        "training/data/records.py) plus manifest.json, using every core.",
    )
    add_options(p, PREPARE_OPTIONS)
    args = p.parse_args(argv)
    if not 1 <= args.quality <= 95:
        p.error(f"--quality must be between 1 and 95, got {args.quality}")
    if args.resize is not None and args.resize < 16:
        p.error(f"--resize must be at least 16 pixels, got {args.resize}")
    if args.max_size is not None and args.max_size < MIN_MAX_SIZE:
        print(
            f"error: --max-size must be at least {MIN_MAX_SIZE} pixels, got {args.max_size} "
            "(leave it out to store the images at their own size)",
            file=sys.stderr,
        )
        return 2
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be at least 1, got {args.workers}")
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    start = time.perf_counter()
    try:
        manifest = convert(
            args.input,
            args.output,
            splits,
            {"train": args.train_shards, "validation": args.validation_shards},
            Encoding(args.reencode, args.quality, args.resize, args.max_size),
            args.validation_labels,
            args.workers,
            args.skip_bad,
            args.overwrite,
            args.seed,
        )
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    images = sum(s.num_examples for s in manifest.splits.values())
    for split, summary in manifest.splits.items():
        print(f"{split}: {summary.num_examples} images in {summary.num_shards} shards")
    for item in manifest.reencoded:
        print(f"re-encoded to RGB JPEG ({item['reason']}): {item['path']}")
    for item in manifest.skipped:
        print(f"skipped unreadable image: {item['path']} ({item['error']})")
    print(
        f"wrote {len(manifest.shards)} shards ({manifest.total_bytes / 1e6:.1f} MB) and "
        f"{MANIFEST_NAME} to {args.output} in {seconds:.1f} s ({images / seconds:.1f} images/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
