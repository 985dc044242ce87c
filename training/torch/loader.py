"""The PyTorch flavour's TFRecord input pipeline, without TensorFlow: this rank's record batches
made by DataLoader worker processes (training.torch.record_batches), finished on the device
(training.torch.device_finish) a few batches ahead of the training step. The data path and its
determinism: docs/architecture.md ("The PyTorch input pipeline").
"""

import contextlib
import multiprocessing
import queue
import threading

import torch

from training.data import shards
from training.errors import TrainingError
from training.torch.device_finish import Finisher
from training.torch.record_batches import RecordBatches, Split, index_split

_END = object()
JOIN_S = 60.0  # how long closing waits for the prefetch thread to stop


def prefetched(items, finish, device: torch.device, depth: int):
    """`finish(item)` for each item, `depth` batches ahead on a thread of their own (its own
    CUDA stream on a GPU, so copies and decode overlap the training step); depth 0: inline."""
    if depth == 0:
        for item in items:
            yield finish(item)
        return
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def put(value) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(value, timeout=0.1)
                return True
        return False

    def work():
        try:
            with torch.cuda.stream(stream) if stream else contextlib.nullcontext():
                for item in items:
                    batch = finish(item)
                    event = None
                    if stream is not None:
                        event = torch.cuda.Event()
                        event.record(stream)
                    if not put((batch, event)):
                        return
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)
            return
        put(_END)

    thread = threading.Thread(target=work, name="batch-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            got = ready.get()
            if got is _END:
                return
            if isinstance(got, BaseException):
                raise got
            batch, event = got
            if event is not None:
                current = torch.cuda.current_stream(device)
                current.wait_event(event)
                for tensor in batch:
                    tensor.record_stream(current)
            yield batch
    finally:
        # Closed (or collected): the thread stops and is joined here, before the process can
        # exit with it still inside torch, which once aborted a run at exit ("terminate called
        # without an active exception", exit 134). It polls `stop` at least every 0.1 s
        # between batches, so it ends within one batch's finish.
        stop.set()
        thread.join(JOIN_S)
        if thread.is_alive():
            raise TrainingError(f"the batch-prefetch thread did not stop within {JOIN_S:.0f} s")


def worker_context():
    """Start worker processes with 'forkserver', as Horovod's PyTorch ImageNet example does:
    fork is unsafe with InfiniBand (verbs) stacks (horovod/horovod
    examples/pytorch/pytorch_imagenet_resnet50.py)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["training.torch.record_batches"])
        return context
    return None


def batches(dataset: RecordBatches, sampler, *, workers: int, prefetch: int, finish: Finisher):
    """The batches `sampler` names, made by `workers` processes (0: in this one) and
    finished `prefetch` batches ahead (0: inline)."""
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=None,  # the dataset makes whole batches
        sampler=sampler,
        num_workers=workers,
        pin_memory=finish.device.type == "cuda",
        prefetch_factor=2 if workers else None,
        multiprocessing_context=worker_context() if workers else None,
    )
    yield from prefetched(iter(loader), finish, finish.device, prefetch)


def resolve_decode(decode: str, device: torch.device) -> str:
    if decode == "auto":
        decode = "gpu" if device.type == "cuda" else "cpu"
    if decode == "gpu":
        if device.type != "cuda":
            raise TrainingError("--decode gpu needs a GPU; this worker has none (use cpu)")
        try:
            import torchvision.io  # noqa: F401
        except ImportError:
            raise TrainingError("--decode gpu needs torchvision (nvJPEG decode)") from None
    return decode


class TFRecordData:
    """This rank's training stream and validation passes from the shards in `args.data_dir`."""

    def __init__(
        self,
        args,
        rank: int,
        size: int,
        device: torch.device,
        workers: int,
        prefetch: int = 2,
        gather=None,
    ):
        """`gather`: horovod.torch's allgather_object, so that shards without a manifest are
        counted once per job (training.data.record_count); None: this process counts them all."""
        self.args, self.rank, self.workers, self.prefetch = args, rank, workers, prefetch
        all_train = shards.list_shards(args.data_dir, "train")
        train_files = shards.shards_for_rank(all_train, rank, size)
        all_val = shards.validation_shards(args.data_dir, bool(args.val_steps))
        self.decode = resolve_decode(getattr(args, "decode", "auto"), device)
        self.finish = Finisher(device, args.image_size, args.channels_last)
        self.train_split = index_split(train_files)
        if not len(self.train_split):
            raise TrainingError(f"this worker's train shards hold no records: {train_files}")
        # Validation on every worker alike (its accuracy is pooled), or on none.
        has_validation = bool(all_val) and args.val_steps != 0
        self.val_split = index_split(all_val[rank::size]) if has_validation else None
        self.steps_per_epoch = args.steps_per_epoch or _steps(
            args, all_train, rank, size, gather, workers
        )

    def _dataset(self, split: Split, train: bool) -> RecordBatches:
        a = self.args
        return RecordBatches(
            split,
            a.batch_size,
            a.image_size,
            a.num_classes,
            train=train,
            seed=a.seed,
            rank=self.rank,
            decode=self.decode,
            label_offset=a.label_offset,
        )

    def train_batches(self, first: int = 0):
        """Micro-batches first, first + 1, … forever."""
        dataset = self._dataset(self.train_split, True)
        return batches(
            dataset, _Count(first), workers=self.workers, prefetch=self.prefetch, finish=self.finish
        )

    def validation_batches(self):
        """A pass over this rank's validation records (None: no validation split)."""
        if self.val_split is None:
            return None
        dataset = self._dataset(self.val_split, False)
        count = len(dataset) if len(self.val_split) else 0
        if self.args.val_steps:
            count = min(count, self.args.val_steps)
        return batches(
            dataset,
            range(count),
            workers=min(self.workers, count),
            prefetch=self.prefetch,
            finish=self.finish,
        )


class _Count:
    """An endless sampler: first, first + 1, …"""

    def __init__(self, first: int):
        self.first = first

    def __iter__(self):
        k = self.first
        while True:
            yield k
            k += 1


def _steps(args, all_train: list[str], rank: int, size: int, gather, threads: int) -> int:
    """Optimizer steps per epoch: the examples from the data manifest when there is one, else
    counted from the record headers, each worker its own shards, shared with `gather`."""
    from training import schedule
    from training.data import record_count

    examples = record_count.count_examples(args.data_dir, all_train, rank, size, gather, threads)
    return schedule.steps_per_epoch(examples, args.batch_size, size, args.grad_accum)
