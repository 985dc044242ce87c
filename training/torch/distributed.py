"""The PyTorch flavour's distributed calls behind one small interface, for either launcher:
`Horovod` (horovodrun, mpirun) or `TorchDistributed` (torchrun: torch.distributed and DDP).
`connect()` picks the one the process was started by. docs/architecture.md, "The PyTorch
flavour", says what each does and why.
"""

import contextlib
import datetime
import inspect
import os
import sys
import time
from pathlib import Path

import torch

from training import events, teardown
from training.flight_recorder import BUFFER_ENV, COLLECTIVE_TIMEOUT_ENV, DUMP_PREFIX_ENV

# torchrun sets TORCHELASTIC_RUN_ID in every worker it starts (torch/distributed/run.py,
# "Environment Variables", torch 2.13.0); horovodrun and mpirun do not.
TORCHRUN_MARKER = "TORCHELASTIC_RUN_ID"
# The store key a failing Gloo rank sets to ask every rank for its flight-recorder dump.
DUMP_SIGNAL = "azdl/flight-recorder-dump"
DUMP_WAIT_S = 10.0  # how long a failing rank waits for the other ranks' dumps


def worker_device(local_rank: int) -> torch.device:
    """This worker's GPU (one per worker, by local rank) when there are GPUs, else the CPU.

    Modulo the GPUs this process sees: a launcher that sets CUDA_VISIBLE_DEVICES per worker
    leaves each of them just one, device 0. Fixed input shapes: cuDNN benchmarks its algorithms
    once per shape and keeps the fastest.
    """
    if torch.cuda.is_available():
        index = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        torch.backends.cudnn.benchmark = True
        return torch.device("cuda", index)
    return torch.device("cpu")


def connect():
    """The workers of this job, for the launcher that started this process."""
    workers = TorchDistributed() if TORCHRUN_MARKER in os.environ else Horovod()
    events.started()
    return workers


class HorovodReplicas:
    """`hvd.DistributedOptimizer` around the optimizer: it averages the gradients (fp16-compressed
    with `fp16_allreduce`) after `grad_accum` backward passes."""

    def __init__(self, hvd, model, optimizer, fp16_allreduce: bool, grad_accum: int):
        # Its backward hooks hand each gradient to Horovod's background thread (on a GPU, its
        # own stream) and return: backward does not wait for other ranks, step() does. A
        # ComputeClock stopped after backward times this rank's compute alone.
        self.hvd, self.forward = hvd, model
        self.optimizer = hvd.DistributedOptimizer(
            optimizer,
            named_parameters=model.named_parameters(),
            compression=hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none,
            backward_passes_per_step=grad_accum,
        )

    def micro_batch(self, last: bool):
        """The context of one micro-batch's backward pass (Horovod counts them itself)."""
        return contextlib.nullcontext()

    def step(self, scaler: torch.amp.GradScaler) -> None:
        """Apply the step's averaged gradients; fp16: allreduce first, then unscale, check for
        inf and skip or apply (GradScaler), the same on every worker."""
        if scaler.is_enabled():
            self.optimizer.synchronize()
            with self.optimizer.skip_synchronize():
                scaler.step(self.optimizer)
            scaler.update()
        else:
            self.optimizer.step()

    def broadcast_parameters(self) -> None:
        self.hvd.broadcast_parameters(self.forward.state_dict(), root_rank=0)


class DDPReplicas:
    """DistributedDataParallel around the model: each step's last backward pass averages the
    gradients (fp16-compressed with `fp16_allreduce`: DDP's fp16 communication hook)."""

    def __init__(self, model, optimizer, device: torch.device, fp16_allreduce: bool, clock):
        from torch.nn.parallel import DistributedDataParallel

        # Each worker keeps its own batch-norm statistics, as under Horovod: DDP's default
        # overwrites them with rank 0's at every forward pass. torch 2.13 names that switch
        # forward_sync_buffers (broadcast_buffers, deprecated, also skips the sync at init);
        # older releases, such as the GPU benchmark machine's, only know broadcast_buffers.
        # DDP broadcasts rank 0's parameters (and buffers, from 2.13) once, here.
        known = inspect.signature(DistributedDataParallel).parameters
        no_buffer_sync = (
            {"forward_sync_buffers": False}
            if "forward_sync_buffers" in known
            else {"broadcast_buffers": False}
        )
        self.forward = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, **no_buffer_sync
        )
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        # DDP's backward waits for the last bucket's allreduce before it returns, so `clock`
        # (a ComputeClock) is cut where each bucket's gradients are ready and handed to the
        # collective: buckets go out in order, so the last cut is the end of this rank's compute.
        # The hooks are DDP's own allreduce (the built-in one's Python twin) and fp16 one.
        send = default_hooks.fp16_compress_hook if fp16_allreduce else default_hooks.allreduce_hook

        def timed(state, bucket):
            clock.cut()
            return send(state, bucket)

        self.forward.register_comm_hook(state=None, hook=timed)
        self.optimizer = optimizer

    def micro_batch(self, last: bool):
        """All but the step's last micro-batch keep their gradients local (DDP's no_sync); the
        last one's backward pass averages the sum over the workers."""
        return contextlib.nullcontext() if last else self.forward.no_sync()

    def step(self, scaler: torch.amp.GradScaler) -> None:
        if scaler.is_enabled():
            scaler.step(self.optimizer)  # unscales; skips the step on inf or NaN
            scaler.update()
        else:
            self.optimizer.step()

    def broadcast_parameters(self) -> None:
        """Done when DDP wrapped the model; a resumed run's ranks all loaded the same state."""


class Horovod:
    """horovod.torch: `hvd.DistributedOptimizer` averages the gradients (the loop follows
    Horovod's own pytorch_imagenet_resnet50.py)."""

    launcher = "horovod"

    def __init__(self):
        import horovod.torch as hvd

        hvd.init()
        self.hvd = hvd
        self.device = worker_device(hvd.local_rank())

    # Properties: after a Horovod elastic reset the same object sees the new world.
    rank = property(lambda self: self.hvd.rank())
    size = property(lambda self: self.hvd.size())
    local_rank = property(lambda self: self.hvd.local_rank())
    local_size = property(lambda self: self.hvd.local_size())

    def allreduce(self, tensor: torch.Tensor, *, average: bool, name: str) -> torch.Tensor:
        op = self.hvd.Average if average else self.hvd.Sum
        return self.hvd.allreduce(tensor, op=op, name=name)

    def broadcast_object(self, obj, name: str):
        return self.hvd.broadcast_object(obj, root_rank=0, name=name)

    def allgather_object(self, obj) -> list:
        return self.hvd.allgather_object(obj)

    def barrier(self) -> None:
        self.hvd.barrier()

    def data_parallel(self, model, optimizer, *, fp16_allreduce: bool, grad_accum: int, clock):
        return HorovodReplicas(self.hvd, model, optimizer, fp16_allreduce, grad_accum)

    def fail(self) -> None:
        """A failure escaped the training: Horovod's stall inspector and training.guard report
        hangs under this launcher."""

    def close(self) -> None:
        """Horovod's background thread stopped and joined now (hvd.shutdown), not by a static
        destructor while the interpreter exits."""
        self.hvd.shutdown()


class TorchDistributed:
    """torch.distributed under torchrun: the process group from torchrun's env:// variables
    (NCCL on GPUs, Gloo on CPUs), DistributedDataParallel for the gradients."""

    launcher = "torchrun"

    def __init__(self):
        import torch.distributed as dist
        import torch.distributed.nn  # noqa: F401  before the group exists: training/teardown.py

        self.dist = dist
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.local_size = int(os.environ["LOCAL_WORLD_SIZE"])
        self.device = worker_device(self.local_rank)
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        timeout = os.environ.get(COLLECTIVE_TIMEOUT_ENV)
        dist.init_process_group(
            backend,
            timeout=datetime.timedelta(seconds=int(timeout)) if timeout else None,
            device_id=self.device if self.device.type == "cuda" else None,
        )
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        # Gloo has no watchdog of its own to dump the flight recorder on a timeout.
        prefix = os.environ.get(DUMP_PREFIX_ENV)
        recording = int(os.environ.get(BUFFER_ENV, "0")) > 0
        self.dumps = None
        if backend == "gloo" and recording and prefix:
            self.dumps = GlooDumps(prefix, self.rank, self.size)

    def allreduce(self, tensor: torch.Tensor, *, average: bool, name: str) -> torch.Tensor:
        """On this worker's device (NCCL reduces GPU tensors only), returned where it was."""
        result = tensor.to(self.device, copy=True)
        self.dist.all_reduce(result, op=self.dist.ReduceOp.SUM)
        return (result / self.size if average else result).to(tensor.device)

    def broadcast_object(self, obj, name: str):
        box = [obj]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def allgather_object(self, obj) -> list:
        gathered = [None] * self.size
        self.dist.all_gather_object(gathered, obj)
        return gathered

    def barrier(self) -> None:
        self.dist.barrier()

    def data_parallel(self, model, optimizer, *, fp16_allreduce: bool, grad_accum: int, clock):
        return DDPReplicas(model, optimizer, self.device, fp16_allreduce, clock)

    def fail(self) -> None:
        """A failure escaped the training: ask every rank for its flight recorder (Gloo; NCCL's
        watchdog dumps on its own with TORCH_NCCL_DUMP_ON_TIMEOUT)."""
        if self.dumps is not None:
            self.dumps.request()

    def close(self) -> None:
        """The end of a run that succeeded: the watcher thread stopped, then the process group
        destroyed, its threads joined while the interpreter is whole (training/teardown.py);
        one still alive is named, as the process may then abort on its way out."""
        if self.dumps is not None:
            self.dumps.stop()
        self.dist.destroy_process_group()
        if alive := teardown.c10d_threads():
            print(
                f"warning: torch.distributed threads alive after destroy_process_group: "
                f"{', '.join(alive)}; the process may abort as it exits (docs/torchrun.md, "
                f"'Ending cleanly')",
                file=sys.stderr,
                flush=True,
            )


class GlooDumps:
    """Flight-recorder dumps of every rank when one rank fails, for Gloo, as ProcessGroupNCCL
    does for NCCL (its monitor thread checks the store for another rank's dump signal every
    TORCH_NCCL_COORD_CHECK_MILSEC: pytorch/pytorch docs/source/torch_nccl_environment_
    variables.md). A daemon thread watches the store; a rank that fails sets the signal."""

    def __init__(self, prefix: str, rank: int, size: int):
        import threading

        from torch.distributed import TCPStore

        self.prefix, self.rank, self.size = prefix, rank, size
        # A client of the store torchrun gave the process group (its address in the worker's
        # environment); the signal's key is this restart's own.
        self.store = TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False
        )
        self.signal = f"{DUMP_SIGNAL}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        self.lock = threading.Lock()
        self.dumped = False
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="azdl-fr-watch", daemon=True)
        self.thread.start()

    def path(self, rank: int) -> Path:
        return Path(f"{self.prefix}{rank}")

    def dump(self) -> None:
        """This rank's flight recorder, once, written whole (a reader never sees half a file)."""
        with self.lock:
            if self.dumped:
                return
            self.dumped = True
            data = torch._C._distributed_c10d._dump_fr_trace(True, False, False)
            path = self.path(self.rank)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)

    def _watch(self) -> None:
        while not self.stopping.wait(0.5):
            if self.store.check([self.signal]):
                self.dump()
                return

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()

    def request(self) -> None:
        """Signal every rank, dump this one's, and wait (DUMP_WAIT_S at most) for the others'."""
        self.store.set(self.signal, str(self.rank))
        self.dump()
        deadline = time.monotonic() + DUMP_WAIT_S
        while time.monotonic() < deadline:
            if all(self.path(r).exists() for r in range(self.size)):
                return
            time.sleep(0.2)
