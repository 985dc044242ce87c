"""PyTorch: synchronous data-parallel ResNet50 training, one process per worker, under Horovod
or torchrun (training.torch.distributed picks the one that started it).

    horovodrun --gloo -np 2 -H localhost:2 python -m training.torch.train --image-size 64 ...
    mpirun -np 2 python -m training.torch.train ...
    torchrun --standalone --nproc-per-node 2 -m training.torch.train ...

docs/architecture.md, "The PyTorch flavour"; data: the synthetic source or TFRecords
(training.torch.loader).
"""

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training import checkpoints, events, heartbeat, recipe, schedule, worker
from training.data import synthetic
from training.epoch_log import EpochLog
from training.errors import TrainingError
from training.options import parse_args
from training.throughput import ThroughputMeter
from training.torch import distributed, torch_loss
from training.torch.compute_clock import ComputeClock
from training.torch.torch_models import build_model

FRAMEWORK = "torch"
PROGRESS_EVERY = 20  # steps between the progress bar's loss readings (each one a host sync)
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

Batch = tuple[torch.Tensor, torch.Tensor]


def to_torch(images: np.ndarray, labels: np.ndarray, channels_last: bool, device) -> Batch:
    """NHWC float images → an NCHW tensor on `device`. NHWC memory *is* channels-last, so on
    the CPU that is a view."""
    x = torch.from_numpy(images).to(device)
    x = x.permute(0, 3, 1, 2).contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format
    )
    y = torch.from_numpy(labels.astype(np.int64, copy=False))
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
    torch.set_num_threads(worker.worker_threads(args, local_size))


class Trainer:
    """One worker's model, optimizer and step; `workers`: training.torch.distributed's interface
    to the other workers, already connected."""

    def __init__(self, args, workers):
        self.args, self.workers, self.device = args, workers, workers.device
        torch.manual_seed(args.seed)
        # --channels-last puts the images, hence every activation, in NHWC. The weights stay
        # NCHW: Horovod 0.28.1 refuses to allreduce or broadcast tensors that are not
        # contiguous in NCHW order (horovod/horovod#3491, open), and gradients follow their
        # parameter's layout; cuDNN converts each weight to its input's layout as it runs.
        self.model = build_model(args.model, args.num_classes).to(self.device)
        self.rescale(workers.size)
        groups = torch_loss.param_groups(self.model, args.weight_decay)
        sgd = torch.optim.SGD(groups, lr=self.peak_lr, momentum=args.momentum)
        # This rank's own forward + backward, for the straggler line (training.epoch_log).
        self.clock = ComputeClock(self.device, args.timing_warmup_steps)
        self.replicas = workers.data_parallel(
            self.model,
            sgd,
            fp16_allreduce=args.fp16_allreduce,
            grad_accum=args.grad_accum,
            clock=self.clock,
        )
        self.optimizer = self.replicas.optimizer
        # torch.compile compiles on the first step; the optimizer and the gradient averaging
        # see the same parameters either way.
        forward = self.replicas.forward
        self.forward = torch.compile(forward) if getattr(args, "compile", False) else forward
        self.autocast_dtype = AUTOCAST_DTYPES.get(args.precision)
        # fp16 needs loss scaling against underflow; bf16 has fp32's range and doesn't.
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=args.precision == "fp16")

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

    def step(self, batches: Iterator[Batch]) -> torch.Tensor:
        """One synchronous optimizer step over `grad_accum` micro-batches: [loss, accuracy] as a
        tensor on the device, so the host does not wait for the step (with Horovod it waits in
        the allreduce of the gradients; with DDP and NCCL not at all)."""
        self.model.train()
        self.optimizer.zero_grad()
        totals = torch.zeros(2, device=self.device)  # loss, correct predictions
        seen, accum = 0, self.args.grad_accum
        for index in range(accum):
            images, labels = next(batches)
            self.clock.start()
            with self.replicas.micro_batch(last=index == accum - 1):
                with self.autocast():
                    logits = self.forward(images)
                    loss = torch_loss.loss(logits, labels, self.args.label_smoothing)
                    loss = loss / accum
                # Gradients of the micro-batches add up; dividing the loss makes them a mean.
                self.scaler.scale(loss).backward()
            self.clock.stop()
            totals += torch.stack([loss.detach(), (logits.argmax(1) == labels).sum()])
            seen += len(labels)
        self.replicas.step(self.scaler)
        self.clock.end_step()
        return torch.stack((totals[0], totals[1] / seen))

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
        summed = self.workers.allreduce(totals, average=False, name="validation")
        loss, top1, top5, seen = summed.tolist()
        seen = max(seen, 1.0)
        return {"val_loss": loss / seen, "val_accuracy": top1 / seen, "val_top5": top5 / seen}

    def save(self, ckpt_dir: Path, epoch, global_step, step=0, steps_per_epoch=0) -> Path:
        """Rank 0 only: model + optimizer + loss-scaler payload, then progress.json pointing at
        it. `step`: optimizer steps done in epoch `epoch` of `steps_per_epoch` (mid-epoch)."""
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        name = checkpoints.payload_name(epoch, step)
        tmp = ckpt_dir / f"{name}.pt.tmp"
        payload = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            # fp16: the loss scale and its growth counter; a resume with the initial scale
            # would skip steps until it has backed off again.
            "scaler": self.scaler.state_dict(),
            "epoch": epoch,
            "step": step,
            "global_step": global_step,
        }
        progress = checkpoints.Progress(
            epoch, global_step, name, FRAMEWORK, self.args.model, step, steps_per_epoch
        )
        with events.checkpoint(global_step):
            torch.save(payload, tmp)
            tmp.replace(ckpt_dir / f"{name}.pt")
            checkpoints.write_progress(ckpt_dir, progress, self.args.keep_checkpoints)
        return ckpt_dir / f"{name}.pt"

    def restore(self, ckpt_dir: str | None) -> checkpoints.Progress | None:
        """Every rank loads the checkpoint rank 0's progress.json names (if any): all ranks agree
        on which one even where a mount shows them files at different times.

        Returns the checkpoint's progress (epochs and steps done), or None: a fresh start.
        """
        workers = self.workers
        began = time.monotonic()
        progress = checkpoints.read_progress(ckpt_dir) if workers.rank == 0 else None
        progress = workers.broadcast_object(progress, name="progress")
        if progress is not None:
            checkpoints.check_compatible(progress, FRAMEWORK, self.args.model, ckpt_dir)
            path = Path(ckpt_dir) / f"{progress.checkpoint}.pt"
            payload = torch.load(path, map_location=self.device)
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            if payload.get("scaler") and self.scaler.is_enabled():  # absent from older ones
                self.scaler.load_state_dict(payload["scaler"])
            if workers.rank == 0:
                print(f"resuming from {path} at {checkpoints.describe(progress)}", flush=True)
        self.replicas.broadcast_parameters()
        if progress is not None:
            events.restored(progress.global_step, time.monotonic() - began)
        return progress

    def dump_weights(self, directory: str) -> Path:
        path = Path(directory) / f"rank-{self.workers.rank}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().float().cpu().numpy() for k, v in self.model.state_dict().items()}
        np.savez(path, **state)
        return path


class Data:
    """Where a worker's batches come from: the synthetic source, or TFRecord shards
    (training.torch.loader). `steps_per_epoch` counts optimizer steps
    (training.schedule.steps_per_epoch); `train` yields micro-batches forever, from
    `start_at(n)`'s micro-batch when called before the first one (a resumed run)."""

    def __init__(self, args, rank, size, local_size, device: torch.device, gather=None):
        """`gather`: the workers' allgather_object, to count unlabelled shards once per job
        (training.data.record_count); every worker must then build its Data."""
        self.args, self.device = args, device
        self._first, self._train = 0, None
        if args.data_dir is None:
            self.source = "synthetic"
            self.steps_per_epoch = args.steps_per_epoch or schedule.steps_per_epoch(
                args.synthetic_length, args.batch_size, size, args.grad_accum
            )
            self._train = synthetic_batches(args, rank, size, device)
            self._records = None
            return
        from training.torch import loader

        workers = args.data_workers
        if workers is None:  # this worker's share of the node's cores decodes
            workers = worker.worker_threads(args, local_size)
        self._records = loader.TFRecordData(args, rank, size, device, workers, gather=gather)
        self.source = "tfrecord"
        self.steps_per_epoch = self._records.steps_per_epoch

    def start_at(self, micro_batch: int) -> None:
        self._first = micro_batch

    @property
    def train(self) -> Iterator[Batch]:
        if self._train is None:
            self._train = self._records.train_batches(self._first)
        return self._train

    def close(self) -> None:
        """Stops the training stream's prefetch thread and loader workers (TFRecords)."""
        if self._records is not None and self._train is not None:
            self._train.close()

    def validation(self) -> Iterator[Batch] | None:
        """A fresh pass over this worker's validation batches, or None: no validation."""
        if self._records is not None:
            return self._records.validation_batches()
        if not self.args.val_steps:
            return None
        # Synthetic data has no held-out split: like the TF flavours, score the training batch.
        return (next(self.train) for _ in range(self.args.val_steps))


def train(args) -> None:
    if args.horovod_timeline:  # read by hvd.init(); rank 0 writes it
        if distributed.TORCHRUN_MARKER in os.environ:
            raise TrainingError(
                "--horovod-timeline is Horovod's; under torchrun, profile with torch.profiler"
            )
        os.environ["HOROVOD_TIMELINE"] = str(Path(args.horovod_timeline).resolve())
    workers = distributed.connect()
    try:
        run(args, workers)
    except TrainingError:  # bad input: every rank says so, nothing hangs
        raise
    except BaseException:
        workers.fail()
        raise
    workers.close()


def run(args, workers) -> None:
    set_threads(args, workers.local_size)
    rank, size, device = workers.rank, workers.size, workers.device
    trainer = Trainer(args, workers)
    progress = trainer.restore(args.checkpoint_dir)
    start_epoch, start_step = (progress.epoch, progress.step) if progress else (0, 0)
    global_step = progress.global_step if progress else 0
    data = Data(args, rank, size, workers.local_size, device, workers.allgather_object)
    data.start_at(global_step * args.grad_accum)  # resumed: the data goes on where it stopped
    if rank == 0:
        print(trainer.recipe_line(size), flush=True)

    writer = None
    if rank == 0 and args.log_dir:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(args.log_dir)
    meter = ThroughputMeter(args.batch_size * args.grad_accum * size, args.timing_warmup_steps)
    epochs = EpochLog(
        args,
        FRAMEWORK,
        rank,
        size,
        workers.allgather_object,
        args.batch_size * args.grad_accum,
        straggler_factor=args.straggler_factor,
    )
    steps = data.steps_per_epoch
    if progress:  # the same fraction of the epoch if the number of workers changed
        start_step = checkpoints.rescale_step(start_step, progress.steps_per_epoch, steps)
    checkpoint = None
    for epoch in range(start_epoch, args.epochs):
        first = start_step if epoch == start_epoch else 0  # a resumed epoch's steps done
        epochs.begin_epoch()
        losses = torch.zeros(2, device=device)  # loss sum, accuracy sum: on the device
        with progress_bar(rank == 0, f"epoch {epoch + 1}/{args.epochs}", steps) as advance:
            advance(float("nan"), first)
            for step in range(first, steps):
                lr = trainer.set_lr(epoch + step / steps)
                meter.begin()
                result = trainer.step(data.train)
                losses += result
                # The host reads the step's figures only where it must: the timed window's
                # ends (honest timing) and every PROGRESS_EVERY steps for the progress bar.
                ends_window = step == steps - 1 or meter.steps + 1 == args.timing_warmup_steps
                shown = rank == 0 and (step - first) % PROGRESS_EVERY == 0
                loss = float(result[0]) if ends_window or shown else None
                meter.end()
                global_step += 1
                heartbeat.beat(global_step)  # the guard's watchdog
                events.step(global_step, args.batch_size * args.grad_accum * size)
                advance(loss)
                due = checkpoints.due(global_step, args.checkpoint_every_steps)
                if rank == 0 and due and step + 1 < steps:  # else the epoch-end one follows
                    ckpt_dir = Path(args.checkpoint_dir)
                    checkpoint = trainer.save(ckpt_dir, epoch, global_step, step + 1, steps)
        ran = steps - first
        mean = workers.allreduce(losses / ran, average=True, name=f"epoch-metrics-{epoch}")
        loss, accuracy = mean.tolist()
        line = f"epoch {epoch + 1}/{args.epochs} - loss: {loss:.4f} - accuracy: {accuracy:.4f}"
        metrics = {"loss": loss, "accuracy": accuracy, "lr": lr}
        validation = data.validation()
        if validation is not None:
            scores = trainer.evaluate(validation)
            metrics.update(scores)
            line += "".join(f" - {name}: {value:.4f}" for name, value in scores.items())
        epochs.end_epoch(epoch + 1, metrics, meter, trainer.clock.take_epoch())
        if rank == 0:
            print(f"{line} - lr: {lr:.5g}", flush=True)
            if writer:
                for name, value in metrics.items():
                    writer.add_scalar(name, value, epoch + 1)
                writer.flush()
            if args.checkpoint_dir:
                checkpoint = trainer.save(Path(args.checkpoint_dir), epoch + 1, global_step)

    events.end(global_step)
    data.close()
    if args.dump_weights:
        trainer.dump_weights(args.dump_weights)
    epochs.close(worker.report(args, FRAMEWORK, meter, data.source, size, rank, checkpoint))


@contextlib.contextmanager
def progress_bar(visible: bool, description: str, total: int):
    """A rich progress bar on rank 0 (with the last loss read); yields `advance(loss, steps=1)`."""
    if not visible:
        yield lambda loss, steps=1: None
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

        def advance(loss: float | None, steps: int = 1) -> None:
            fields = {} if loss is None else {"loss": loss}  # None: keep the last one shown
            bar.update(task, advance=steps, **fields)

        yield advance


def main(argv=None) -> int:
    return worker.run_main(train, parse_args(FRAMEWORK, argv))


if __name__ == "__main__":
    sys.exit(main())
