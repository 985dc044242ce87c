"""PyTorch + Horovod: synchronous data-parallel ResNet50 training, one process per worker.

    horovodrun --gloo -np 2 -H localhost:2 python -m training.train_torch --image-size 64 ...
    mpirun -np 2 python -m training.train_torch ...

The loop follows Horovod's own `pytorch_imagenet_resnet50.py`: `hvd.DistributedOptimizer`
averages the gradients (fp16-compressed with `--fp16-allreduce`; `--grad-accum` micro-batches
per step via `backward_passes_per_step`), rank 0's parameters and optimizer state are broadcast
before the first step, and only rank 0 writes checkpoints, TensorBoard logs and the throughput
lines. Data: the shared synthetic source, or the shared TFRecord pipeline read through tf.data
in this process and handed to torch batch by batch.
"""

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training import checkpoints, recipe, schedule, synthetic, tf_common
from training.options import parse_args
from training.throughput import ThroughputMeter
from training.torch_models import build_model

FRAMEWORK = "torch"
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

Batch = tuple[torch.Tensor, torch.Tensor]


def worker_device(local_rank: int) -> torch.device:
    """This worker's GPU (one per worker, by local rank) when there are GPUs, else the CPU.

    Modulo the GPUs this process sees: a launcher that sets CUDA_VISIBLE_DEVICES per worker
    leaves each of them just one, device 0.
    """
    if torch.cuda.is_available():
        index = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def to_torch(images: np.ndarray, labels: np.ndarray, channels_last: bool, device) -> Batch:
    """NHWC float images → an NCHW tensor on `device`. NHWC memory *is* channels-last, so on
    the CPU that is a view."""
    x = torch.from_numpy(np.require(images, requirements=["C", "W"])).to(device)
    x = x.permute(0, 3, 1, 2).contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format
    )
    y = torch.from_numpy(np.require(labels, dtype=np.int64, requirements=["W"]))
    return x, y.to(device)


def synthetic_batches(args, rank: int, size: int, device) -> Iterator[Batch]:
    """This rank's micro-batches of the shared synthetic global batch, forever.

    One step's global batch is `batch × grad_accum × workers` images; rank r takes its slice and
    cuts it into `grad_accum` micro-batches, so 1 worker × 2b and 2 workers × b (and 1 worker ×
    b × 2 micro-batches) all see the same images in a step.
    """
    images, labels = synthetic.rank_batch(
        args.batch_size * args.grad_accum, rank, size, args.image_size, args.num_classes, args.seed
    )
    b = args.batch_size
    micro = [
        to_torch(images[i : i + b], labels[i : i + b], args.channels_last, device)
        for i in range(0, len(labels), b)
    ]
    while True:
        yield from micro


def set_threads(args, local_size: int) -> None:
    """`--threads`, or this node's cores shared out among its workers (torch's own default,
    every core per process, oversubscribes them: 2 workers on 2 cores ran 10× slower)."""
    torch.set_num_threads(tf_common.worker_threads(args, local_size))


class Trainer:
    """One worker's model, optimizer and step; `hvd` is horovod.torch, already initialised."""

    def __init__(self, args, hvd, device: torch.device):
        self.args, self.hvd, self.device = args, hvd, device
        torch.manual_seed(args.seed)
        # --channels-last puts the images, hence every activation, in NHWC. The weights stay
        # NCHW: Horovod 0.28.1 refuses to allreduce or broadcast non-contiguous tensors
        # (horovod/horovod#3491), and gradients follow their parameter's layout.
        self.model = build_model(args.model, args.num_classes).to(device)
        self.rescale(hvd.size())
        groups = recipe.torch_param_groups(self.model, args.weight_decay)
        sgd = torch.optim.SGD(groups, lr=self.peak_lr, momentum=args.momentum)
        self.optimizer = hvd.DistributedOptimizer(
            sgd,
            named_parameters=self.model.named_parameters(),
            compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none,
            backward_passes_per_step=args.grad_accum,
        )
        self.autocast_dtype = AUTOCAST_DTYPES.get(args.precision)
        # fp16 needs loss scaling against underflow; bf16 has fp32's range and doesn't.
        self.scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")

    def rescale(self, workers: int) -> None:
        """The peak rate for `workers` workers (again after an elastic reset)."""
        a = self.args
        self.peak_lr = schedule.peak_lr(
            a.base_lr, a.base_batch, a.batch_size * a.grad_accum, workers
        )

    def set_lr(self, epoch: float) -> float:
        lr = schedule.from_options(self.args, self.peak_lr)(epoch)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def step(self, batches: Iterator[Batch]) -> tuple[float, float]:
        """One synchronous optimizer step over `grad_accum` micro-batches: (loss, accuracy)."""
        self.model.train()
        self.optimizer.zero_grad()
        totals = torch.zeros(2, device=self.device)  # loss, correct predictions
        seen = 0
        for _ in range(self.args.grad_accum):
            images, labels = next(batches)
            with self.autocast():
                logits = self.model(images)
                loss = recipe.torch_loss(logits, labels, self.args.label_smoothing)
                loss = loss / self.args.grad_accum
            # Gradients of the micro-batches add up; dividing the loss makes them a mean.
            self.scaler.scale(loss).backward()
            totals += torch.stack([loss.detach(), (logits.argmax(1) == labels).sum()])
            seen += len(labels)
        if self.scaler.is_enabled():
            self.optimizer.synchronize()  # allreduce first, then unscale and check for inf
            with self.optimizer.skip_synchronize():
                self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        loss, correct = totals.tolist()  # waits for the step: the throughput timing needs it
        return loss, correct / seen

    def recipe_line(self, workers: int) -> str:
        decayed = {id(p) for p in self.optimizer.param_groups[0]["params"]}
        tensors = [(tuple(p.shape), id(p) in decayed) for p in self.model.parameters()]
        batch = self.args.batch_size * self.args.grad_accum * workers
        return recipe.summary_line(self.args, tensors, self.peak_lr, batch)

    @torch.no_grad()
    def evaluate(self, batches: Iterator[Batch]) -> dict[str, float]:
        """Validation loss (the training loss without weight decay), top-1 and top-5 accuracy
        over this worker's `batches`, pooled over all workers (sums and counts added)."""
        self.model.eval()
        totals = torch.zeros(4, dtype=torch.float64)  # loss sum, top-1 hits, top-5 hits, seen
        for images, labels in batches:
            with self.autocast():
                logits = self.model(images).float()
            loss = F.cross_entropy(
                logits, labels, label_smoothing=self.args.label_smoothing, reduction="sum"
            )
            top5 = logits.topk(min(5, logits.shape[1]), dim=1).indices
            hits = (top5 == labels[:, None]).sum(0)  # per rank of the prediction
            totals += torch.stack([loss, hits[0], hits.sum(), torch.tensor(len(labels))]).cpu()
        loss, top1, top5, seen = self.hvd.allreduce(totals, op=self.hvd.Sum).tolist()
        seen = max(seen, 1.0)
        return {"val_loss": loss / seen, "val_accuracy": top1 / seen, "val_top5": top5 / seen}

    def save(self, ckpt_dir: Path, epoch: int, global_step: int) -> Path:
        """Rank 0 only: model + optimizer payload, then progress.json pointing at it."""
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        name = checkpoints.payload_name(epoch)
        tmp = ckpt_dir / f"{name}.pt.tmp"
        payload = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": epoch,
            "global_step": global_step,
        }
        torch.save(payload, tmp)
        tmp.replace(ckpt_dir / f"{name}.pt")
        progress = checkpoints.Progress(epoch, global_step, name, FRAMEWORK, self.args.model)
        checkpoints.write_progress(ckpt_dir, progress, self.args.keep_checkpoints)
        return ckpt_dir / f"{name}.pt"

    def restore_and_broadcast(self, ckpt_dir: str | None) -> tuple[int, int]:
        """Rank 0 loads the last checkpoint (if any); everything is broadcast from rank 0.

        Returns (epochs done, global step) to resume from.
        """
        hvd = self.hvd
        progress = checkpoints.read_progress(ckpt_dir) if hvd.rank() == 0 else None
        progress = hvd.broadcast_object(progress, root_rank=0, name="progress")
        if progress is not None:
            checkpoints.check_compatible(progress, FRAMEWORK, self.args.model, ckpt_dir)
            if hvd.rank() == 0:
                payload = torch.load(
                    Path(ckpt_dir) / f"{progress.checkpoint}.pt", map_location=self.device
                )
                self.model.load_state_dict(payload["model"])
                self.optimizer.load_state_dict(payload["optimizer"])
        if progress is not None:
            # Horovod first steps a stateless optimizer once with zero gradients to create its
            # state (horovod/torch/functions.py); with weight decay that step shrinks the
            # weights. So: only when resuming, and before the parameters, which overwrite it.
            hvd.broadcast_optimizer_state(self.optimizer, root_rank=0)
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        return (progress.epoch, progress.global_step) if progress else (0, 0)

    def dump_weights(self, directory: str) -> Path:
        path = Path(directory) / f"rank-{self.hvd.rank()}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().float().cpu().numpy() for k, v in self.model.state_dict().items()}
        np.savez(path, **state)
        return path


def numpy_batches(dataset, files: list[str], channels_last: bool, device) -> Iterator[Batch]:
    """Batches of a tf.data dataset as torch tensors; TF's data errors name the shard."""
    from training.tf_pipeline import explained_data_errors

    batches = dataset.as_numpy_iterator()
    while True:
        with explained_data_errors(files):
            try:
                images, labels = next(batches)
            except StopIteration:
                return
        yield to_torch(images, labels, channels_last, device)


class Data:
    """Where a worker's batches come from: the synthetic source, or TFRecords via tf.data.

    `steps_per_epoch` counts optimizer steps (training.schedule.steps_per_epoch).
    """

    def __init__(self, args, rank: int, size: int, local_size: int, device: torch.device):
        self.args, self.device = args, device
        if args.data_dir is None:
            self.source = "synthetic"
            self.steps_per_epoch = args.steps_per_epoch or schedule.steps_per_epoch(
                args.synthetic_length, args.batch_size, size, args.grad_accum
            )
            self.train = synthetic_batches(args, rank, size, device)
            self._tf = None
            return
        import tensorflow as tf

        from training import tf_pipeline

        # TensorFlow's ops here are tf.data's bookkeeping: one thread each keeps them off
        # torch's cores. Reading and decoding run on the dataset's own pool, this worker's share.
        with contextlib.suppress(RuntimeError):  # already fixed: TF ran before in this process
            tf.config.threading.set_inter_op_parallelism_threads(1)
            tf.config.threading.set_intra_op_parallelism_threads(1)
        self._tf = tf_pipeline.make_data(
            args, rank, size, tf_common.worker_threads(args, local_size)
        )
        self.source = self._tf.source
        self.steps_per_epoch = self._tf.steps_per_epoch
        self.train = numpy_batches(self._tf.train, self._tf.files, args.channels_last, device)

    def validation(self) -> Iterator[Batch] | None:
        """A fresh pass over this worker's validation batches, or None: no validation."""
        if self._tf is not None:
            if self._tf.validation is None:
                return None
            tf_data, channels_last = self._tf, self.args.channels_last
            return numpy_batches(tf_data.validation, tf_data.files, channels_last, self.device)
        if not self.args.val_steps:
            return None
        # Synthetic data has no held-out split: like the TF flavours, score the training batch.
        return (next(self.train) for _ in range(self.args.val_steps))


def train(args) -> None:
    import horovod.torch as hvd

    if args.horovod_timeline:  # read by hvd.init(); rank 0 writes it
        os.environ["HOROVOD_TIMELINE"] = str(Path(args.horovod_timeline).resolve())
    hvd.init()
    set_threads(args, hvd.local_size())
    rank, size = hvd.rank(), hvd.size()
    device = worker_device(hvd.local_rank())
    data = Data(args, rank, size, hvd.local_size(), device)
    trainer = Trainer(args, hvd, device)
    start_epoch, global_step = trainer.restore_and_broadcast(args.checkpoint_dir)
    if rank == 0:
        print(trainer.recipe_line(size), flush=True)
    if rank == 0 and start_epoch:
        print(
            f"resuming from {args.checkpoint_dir} at epoch {start_epoch} (step {global_step})",
            flush=True,
        )

    writer = None
    if rank == 0 and args.log_dir:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(args.log_dir)
    meter = ThroughputMeter(args.batch_size * args.grad_accum * size, args.timing_warmup_steps)
    steps = data.steps_per_epoch
    checkpoint = None
    for epoch in range(start_epoch, args.epochs):
        losses = torch.zeros(2, dtype=torch.float64)  # loss sum, accuracy sum
        with progress_bar(rank == 0, f"epoch {epoch + 1}/{args.epochs}", steps) as advance:
            for step in range(steps):
                lr = trainer.set_lr(epoch + step / steps)
                meter.begin()
                loss, accuracy = trainer.step(data.train)
                meter.end()
                global_step += 1
                losses += torch.tensor([loss, accuracy], dtype=torch.float64)
                advance(loss)
        loss, accuracy = (hvd.allreduce(losses / steps, name=f"epoch-metrics-{epoch}")).tolist()
        line = f"epoch {epoch + 1}/{args.epochs} - loss: {loss:.4f} - accuracy: {accuracy:.4f}"
        metrics = {"loss": loss, "accuracy": accuracy, "lr": lr}
        validation = data.validation()
        if validation is not None:
            scores = trainer.evaluate(validation)
            metrics.update(scores)
            line += "".join(f" - {name}: {value:.4f}" for name, value in scores.items())
        if rank == 0:
            print(f"{line} - lr: {lr:.5g}", flush=True)
            if writer:
                for name, value in metrics.items():
                    writer.add_scalar(name, value, epoch + 1)
                writer.flush()
            if args.checkpoint_dir:
                checkpoint = trainer.save(Path(args.checkpoint_dir), epoch + 1, global_step)

    if args.dump_weights:
        trainer.dump_weights(args.dump_weights)
    tf_common.report(args, FRAMEWORK, meter, data.source, size, rank, checkpoint)


@contextlib.contextmanager
def progress_bar(visible: bool, description: str, total: int):
    """A rich progress bar on rank 0 (with the last loss); yields `advance(loss)`."""
    if not visible:
        yield lambda loss: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = (
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        "loss {task.fields[loss]:.4f}",
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(description, total=total, loss=float("nan"))
        yield lambda loss: bar.update(task, advance=1, loss=loss)


def main(argv=None) -> int:
    return tf_common.run_main(train, parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
