"""Land-cover segmentation of aerial tiles with Horovod and PyTorch: a small U-Net.

    azdl train --script examples/segmentation/train_segmentation.py --data data/landcover \\
        -- --epochs 3
    azdl submit --stack dev --script examples/segmentation/train_segmentation.py \\
        --data-path landcover -- --epochs 50 --batch-size 32

One process per worker (GPU or CPU). The loop follows Horovod's PyTorch examples: the learning
rate scaled by the number of workers, `hvd.DistributedOptimizer` averaging gradients, rank 0's
weights and optimizer state broadcast before the first step, and only rank 0 writing
checkpoints and files. Every worker reads its own shards (every size-th one, by global rank).

Per epoch, each worker runs the validation tiles of its shards and counts a confusion matrix;
the matrices are summed across workers, so the per-class pixel accuracy and IoU that rank 0
prints are over the whole validation split. Resume: a run that finds checkpoints in its
checkpoint folder continues after the newest one.

Folders (command line first, then the azdl variables, then defaults): --data-dir or
AZDL_DATA_DIR; --checkpoint-dir or AZDL_CHECKPOINT_DIR (else ./checkpoints); --output-dir or
AZDL_OUTPUT_DIR (else ./outputs) for the final model and metrics.json; --log-dir or
AZDL_LOG_DIR (else the output folder) for metrics.jsonl, one line per epoch. Rank 0 also logs
the epoch's loss, pixel accuracy, mean IoU and tiles/s to MLflow (training.metrics: the job's
run in the Azure ML studio, the run folder's store under `azdl train`).
"""

import argparse
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

import horovod.torch as hvd
import numpy as np
import tiles
import torch
import torch.nn.functional as F
from torch import nn

from training import metrics


def parse_args(argv=None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description="Horovod PyTorch U-Net for land-cover tiles")
    p.add_argument("--data-dir", default=env("AZDL_DATA_DIR"), help="shards + manifest.json")
    p.add_argument("--checkpoint-dir", default=env("AZDL_CHECKPOINT_DIR", "checkpoints"))
    p.add_argument("--output-dir", default=env("AZDL_OUTPUT_DIR", "outputs"))
    p.add_argument("--log-dir", default=env("AZDL_LOG_DIR"))
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--steps-per-epoch", type=int, help="default: training tiles / global batch")
    p.add_argument("--batch-size", type=int, default=16, help="tiles per worker and step")
    p.add_argument("--lr", type=float, default=1e-3, help="per worker; scaled by worker count")
    p.add_argument("--width", type=int, default=32, help="channels of the first U-Net level")
    p.add_argument("--num-classes", type=int, help="default: from manifest.json")
    p.add_argument("--loader-workers", type=int, help="data loader processes per worker")
    p.add_argument("--shuffle-buffer", type=int, default=256, help="tiles kept for shuffling")
    p.add_argument("--amp", action="store_true", help="bf16 autocast on GPUs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-checkpoints", type=int, default=3)
    args = p.parse_args(argv)
    if not args.data_dir:
        p.error("no data: give --data-dir (or set AZDL_DATA_DIR; azdl sets it from --data)")
    return args


# ---- model: a U-Net (Ronneberger et al. 2015) with GroupNorm ----------------------------------
# GroupNorm instead of BatchNorm: no running statistics, so nothing per-worker escapes the
# gradient averaging and every worker holds identical weights at every step.


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(8, cout), nn.ReLU(True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.GroupNorm(8, cout), nn.ReLU(True),
    )  # fmt: skip


class UNet(nn.Module):
    def __init__(self, bands: int, num_classes: int, width: int = 32, levels: int = 3):
        super().__init__()
        widths = [width * 2**i for i in range(levels + 1)]
        self.down = nn.ModuleList([block(bands, widths[0])])
        self.down.extend(block(widths[i], widths[i + 1]) for i in range(levels))
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2)
            for i in reversed(range(levels))
        )
        self.merge = nn.ModuleList(block(2 * widths[i], widths[i]) for i in reversed(range(levels)))
        self.head = nn.Conv2d(widths[0], num_classes, 1)
        self.levels = levels

    def forward(self, x):
        skips = []
        for i, down in enumerate(self.down):
            x = down(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        x = skips.pop()
        for up, merge in zip(self.up, self.merge, strict=True):
            x = merge(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


# ---- data ------------------------------------------------------------------------------------


class TileStream(torch.utils.data.IterableDataset):
    """This worker's tiles: its shards in a new order each pass, through a shuffle buffer,
    randomly flipped and rotated (aerial imagery has no up); forever when `repeat`."""

    def __init__(self, shards, num_classes, repeat, buffer, seed):
        self.shards, self.num_classes = shards, num_classes
        self.repeat, self.buffer, self.seed = repeat, buffer, seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        shards = self.shards if info is None else self.shards[info.id :: info.num_workers]
        rng = random.Random(self.seed + (info.id if info else 0))
        held = []
        while shards:
            order = list(shards)
            if self.repeat:
                rng.shuffle(order)
            for shard in order:
                for image, mask in tiles.read_shard(shard, self.num_classes):
                    if self.repeat:
                        k, flip = rng.randrange(4), rng.random() < 0.5
                        image, mask = np.rot90(image, k), np.rot90(mask, k)
                        if flip:
                            image, mask = image[:, ::-1], mask[:, ::-1]
                    held.append(to_tensors(image, mask))
                    if len(held) >= self.buffer or not self.repeat:
                        yield held.pop(rng.randrange(len(held)))
            if not self.repeat:
                return


def to_tensors(image: np.ndarray, mask: np.ndarray):
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float() / 127.5 - 1.0
    y = torch.from_numpy(np.ascontiguousarray(mask)).long()
    return x, y


# ---- metrics ---------------------------------------------------------------------------------


def confusion(logits, target, num_classes) -> torch.Tensor:
    """Counts of (true class, predicted class) over the labelled pixels."""
    pred = logits.argmax(1)
    keep = target != tiles.IGNORE
    index = target[keep] * num_classes + pred[keep]
    counts = torch.bincount(index, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes).double()


def scores(matrix: torch.Tensor) -> dict:
    """Per-class pixel accuracy (recall) and IoU from a pooled confusion matrix; mean IoU over
    the classes that occur (in truth or prediction)."""
    tp = matrix.diag()
    truth, predicted = matrix.sum(1), matrix.sum(0)
    union = truth + predicted - tp
    present = union > 0
    iou = torch.where(present, tp / union.clamp(min=1), torch.zeros_like(tp))
    accuracy = torch.where(truth > 0, tp / truth.clamp(min=1), torch.zeros_like(tp))
    return {
        "pixel_accuracy": (tp.sum() / matrix.sum().clamp(min=1)).item(),
        "mean_iou": (iou[present].mean().item() if present.any() else 0.0),
        "class_accuracy": accuracy.tolist(),
        "class_iou": iou.tolist(),
        "pixels": int(matrix.sum().item()),
    }


# ---- checkpoints (rank 0 writes; rank 0 reads, then broadcasts) ------------------------------


def latest_checkpoint(folder: Path):
    found = sorted(folder.glob("checkpoint-*.pt"))
    return found[-1] if found else None


def save_checkpoint(folder: Path, epoch: int, model, optimizer, keep: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"checkpoint-{epoch:04d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(
        {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp
    )
    tmp.replace(path)  # never a half-written checkpoint under the real name
    for old in sorted(folder.glob("checkpoint-*.pt"))[:-keep]:
        old.unlink()
    return path


# class colours for examples.png (water, tree canopy, low vegetation, impervious, then more)
PALETTE = np.array(
    [[30, 90, 200], [20, 110, 40], [150, 200, 90], [160, 160, 160], [200, 150, 90], [220, 60, 60]]
    + [[(37 * i) % 256, (91 * i) % 256, (53 * i) % 256] for i in range(6, 256)],
    np.uint8,
)


def save_examples(model, shard, num_classes, device, path: Path, count: int = 4) -> None:
    """A picture of a few validation tiles: image (RGB), true mask, predicted mask per row."""
    from PIL import Image

    rows = []
    model.eval()
    with torch.no_grad():
        pairs = tiles.read_shard(shard, num_classes)
        for _, (image, mask) in zip(range(count), pairs, strict=False):
            x, _ = to_tensors(image, mask)
            pred = model(x[None].to(device)).argmax(1)[0].cpu().numpy()
            truth = np.where(mask == tiles.IGNORE, 0, mask)
            gap = np.full((mask.shape[0], 4, 3), 255, np.uint8)
            rows.append(np.hstack([image[:, :, :3], gap, PALETTE[truth], gap, PALETTE[pred]]))
    Image.fromarray(np.vstack(rows)).resize(
        (rows[0].shape[1] * 2, len(rows) * rows[0].shape[0] * 2), Image.NEAREST
    ).save(path)


def weights_digest(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


# ---- training --------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if torch.cuda.is_available():
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    torch.manual_seed(args.seed)

    data_dir = Path(args.data_dir)
    manifest_path = data_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    options = manifest.get("options", {})
    num_classes = args.num_classes or options.get("num_classes")
    if not num_classes:
        sys.exit(f"error: {manifest_path} missing; give --num-classes")
    class_names = sorted(manifest.get("label_map", {}), key=manifest.get("label_map", {}).get)
    class_names = class_names or [str(i) for i in range(num_classes)]

    train_shards = tiles.list_shards(data_dir, "train")
    if size > len(train_shards):
        sys.exit(f"error: {size} workers but {len(train_shards)} training shards in {data_dir}: "
                 "every worker needs at least one (prepare_tiles.py --shards)")  # fmt: skip
    try:
        val_shards = tiles.list_shards(data_dir, "validation")[rank::size]
    except tiles.TileError:
        val_shards = []
    bands = options.get("bands") or next(tiles.read_shard(train_shards[0], num_classes))[0].shape[2]
    train_tiles = manifest.get("splits", {}).get("train", {}).get("num_examples", 0)
    steps = args.steps_per_epoch or max(1, train_tiles // (args.batch_size * size))

    loader_workers = args.loader_workers
    if loader_workers is None:
        loader_workers = 4 if device.type == "cuda" else 0
    stream = TileStream(train_shards[rank::size], num_classes, True, args.shuffle_buffer,
                        args.seed * 1000 + rank)  # fmt: skip
    train_batches = iter(torch.utils.data.DataLoader(
        stream, batch_size=args.batch_size, num_workers=loader_workers,
        pin_memory=device.type == "cuda", persistent_workers=loader_workers > 0,
    ))  # fmt: skip

    model = UNet(bands, num_classes, args.width).to(device)
    # Horovod's rule: scale the learning rate by the number of workers (the global batch grows).
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * size)

    checkpoint_dir = Path(args.checkpoint_dir)
    start_epoch = 0
    if rank == 0 and (found := latest_checkpoint(checkpoint_dir)):
        state = torch.load(found, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
        print(f"resuming from {found} at epoch {start_epoch + 1}", flush=True)
    start_epoch = hvd.broadcast_object(start_epoch, root_rank=0, name="start_epoch")
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    if rank == 0:
        print(f"{size} workers on {device.type}, {bands} bands, {num_classes} classes, "
              f"{len(train_shards)} train shards, {steps} steps/epoch of {args.batch_size} "
              f"tiles per worker", flush=True)  # fmt: skip
    output_dir = Path(args.output_dir)
    log_dir = Path(args.log_dir) if args.log_dir else output_dir
    autocast = torch.autocast(
        device.type, dtype=torch.bfloat16, enabled=args.amp and device.type == "cuda"
    )
    result = {}
    run = metrics.start(rank, params={"epochs": args.epochs, "batch_size": args.batch_size})
    for epoch in range(start_epoch, args.epochs):
        model.train()
        started, total_loss = time.perf_counter(), torch.zeros((), device=device)
        for _ in range(steps):
            images, masks = (t.to(device, non_blocking=True) for t in next(train_batches))
            with autocast:
                loss = F.cross_entropy(model(images), masks, ignore_index=tiles.IGNORE)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.detach()
        loss_avg = hvd.allreduce(total_loss / steps, name="loss").item()
        seconds = time.perf_counter() - started

        model.eval()
        matrix = torch.zeros(num_classes, num_classes, dtype=torch.float64)
        validation = TileStream(val_shards, num_classes, False, 1, 0)
        with torch.no_grad(), autocast:
            for images, masks in torch.utils.data.DataLoader(validation, args.batch_size):
                logits = model(images.to(device)).float()
                matrix += confusion(logits, masks.to(device), num_classes).cpu()
        matrix = hvd.allreduce(matrix, op=hvd.Sum, name="confusion")  # every worker's tiles
        result = scores(matrix) | {"epoch": epoch + 1, "loss": loss_avg}
        if rank == 0:
            names_scores = zip(
                class_names, result["class_accuracy"], result["class_iou"], strict=True
            )
            per_class = " ".join(f"{name} {acc:.3f}/{iou:.3f}" for name, acc, iou in names_scores)
            print(
                f"epoch {epoch + 1}/{args.epochs}: loss: {loss_avg:.4f} pixel accuracy: "
                f"{result['pixel_accuracy']:.4f} mean IoU: {result['mean_iou']:.4f} "
                f"({steps * args.batch_size * size / seconds:.1f} tiles/s) | per class "
                f"accuracy/IoU: {per_class}",
                flush=True,
            )
            save_checkpoint(checkpoint_dir, epoch, model, optimizer, args.keep_checkpoints)
            log_dir.mkdir(parents=True, exist_ok=True)
            with open(log_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(result) + "\n")
        tiles_per_sec = steps * args.batch_size * size / seconds
        scalars = {k: result[k] for k in ("loss", "pixel_accuracy", "mean_iou")}
        run.log(scalars | {"tiles_per_sec": tiles_per_sec, "epoch_time_s": seconds}, epoch + 1)
    run.close()

    if rank == 0:
        output_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), output_dir / "model.pt")
        (output_dir / "metrics.json").write_text(
            json.dumps(result | {"classes": class_names}, indent=2) + "\n"
        )
        if val_shards:
            save_examples(model, val_shards[0], num_classes, device, output_dir / "examples.png")
    # Each worker reports its own weights: after synchronous training they must be identical.
    print(f"rank {rank}: weights {weights_digest(model)}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tiles.TileError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
