"""P3: ResNet50 training throughput of the PyTorch flavour on one GPU, synthetic or real data.

    python3 benchmarks/gpu/p3_resnet50.py --data synthetic              # on the GPU machine
    python3 benchmarks/gpu/p3_resnet50.py --data real --data-dir DIR --decode gpu
    python3 benchmarks/gpu/p3_resnet50.py --device cpu --model tiny ... # a CPU smoke run (CI)

Runs the flavour's own parts (training.torch.train: Data, Trainer.step; training.torch.loader)
for --warmup steps, then times --steps steps (a device sync at each end of the timed window),
then profiles --profile-steps more with torch.profiler: the share of that wall time in which a
GPU kernel was running (the union of the kernels' intervals, so overlapping streams are not
counted twice). Prints one JSON line.

--workers: `one` (default) the plain optimizer in one process; `ddp` torch.distributed with a
world of one (NCCL on a GPU, Gloo on the CPU) and DistributedDataParallel, as under torchrun;
`horovod` `hvd.DistributedOptimizer` on one worker, which registers no gradient hooks then
(horovod/torch/optimizer.py v0.28.1 registers them only `if ... size() > 1`): that row is plain
PyTorch under hvd.init. `--weights-channels-last` needs a run without Horovod (Horovod 0.28.1
refuses channels-last weights, horovod/horovod#3491).

--sync-debug (a GPU only): the timed steps run under torch.cuda.set_sync_debug_mode("error"),
so a step that makes the host wait for the device (a .item(), a host tensor built from device
values, a blocking copy) fails the run, naming the call.

At the end the data stream and the workers are closed in order, and a daemon thread still
alive 5 s later fails the run: one left inside torch while the interpreter exits once aborted a run
("terminate called without an active exception", exit 134).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))


class OneProcess:
    """One worker and no distributed library: what training.torch.train's Trainer asks of its
    workers (training.torch.distributed), for a single process."""

    launcher, rank, size, local_rank, local_size = "none", 0, 1, 0, 1

    def __init__(self, device):
        self.device = device

    def data_parallel(self, model, optimizer, **_):
        return PlainReplicas(model, optimizer)

    def close(self) -> None:
        """Nothing was started."""


class PlainReplicas:
    """The model and optimizer as they are: nothing to average over."""

    def __init__(self, model, optimizer):
        self.forward, self.optimizer = model, optimizer

    def micro_batch(self, last: bool):
        import contextlib

        return contextlib.nullcontext()

    def step(self, scaler) -> None:
        if scaler.is_enabled():
            scaler.step(self.optimizer)
            scaler.update()
        else:
            self.optimizer.step()


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", choices=("synthetic", "real"), default="synthetic")
    p.add_argument("--data-dir", help="TFRecord shards (--data real)")
    p.add_argument("--decode", choices=("cpu", "gpu"), default="gpu")
    p.add_argument("--data-workers", type=int, default=None, help="default: every core")
    p.add_argument("--model", choices=("resnet50", "tiny"), default="resnet50")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="bf16")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument(
        "--weights-channels-last", action="store_true", help="not with --workers horovod"
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--workers", choices=("one", "ddp", "horovod"), default="one")
    p.add_argument("--sync-debug", action="store_true", help="fail on a host sync in a step")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--profile-steps", type=int, default=10, help="0: no kernel-time share")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--label", default="", help="a name for this run in the results")
    args = p.parse_args(argv)
    if args.weights_channels_last and args.workers == "horovod":
        p.error("--weights-channels-last needs --workers one or ddp (horovod/horovod#3491)")
    if args.sync_debug and args.device != "cuda":
        p.error("--sync-debug needs --device cuda (torch.cuda.set_sync_debug_mode)")
    if args.data == "real" and not args.data_dir:
        p.error("--data real needs --data-dir")
    if args.device == "cpu" and args.decode == "gpu" and args.data == "real":
        p.error("--decode gpu needs --device cuda")
    return args


def training_args(args):
    """The flavour's own options for this run (training.options), as its scripts parse them."""
    from training.options import parse_args

    argv = [
        "--model",
        args.model,
        "--image-size",
        str(args.image_size),
        "--batch-size",
        str(args.batch_size),
        "--precision",
        args.precision,
        "--warmup-epochs",
        "0",
        "--lr-decay",
        "none",
        "--steps-per-epoch",
        str(10**6),
        "--decode",
        args.decode,
    ]
    if args.data == "real":
        argv += ["--data-dir", args.data_dir, "--num-classes", str(_classes(args.data_dir))]
    if args.data_workers is not None:
        argv += ["--data-workers", str(args.data_workers)]
    if args.channels_last:
        argv.append("--channels-last")
    if args.compile:
        argv.append("--compile")
    return parse_args("torch", argv)


def _classes(data_dir: str) -> int:
    """The classes of the data tool's label map (manifest.json), else ImageNet's 1000."""
    from training.data.prepare.manifest import load_manifest

    manifest = Path(data_dir) / "manifest.json"
    if manifest.exists():
        return max(2, len(load_manifest(manifest).label_map))
    return 1000


def _covered(spans: list[tuple[float, float]]) -> float:
    """Time covered by at least one of `spans` (overlaps counted once)."""
    covered, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        covered += stop - max(start, end)
        end = stop
    return covered


def kernel_share(profiler, wall_us: float) -> float:
    """The share of `wall_us` in which a kernel of the training stream ran.

    Kernels are grouped by their CUDA stream (the profiler's `device_resource_id` of a device
    event); the training stream is the one with the most kernel time, so the `--decode gpu`
    stream's decode and augmentation kernels, which overlap the step on a stream of their own
    (training.torch.loader.prefetched), do not count."""
    streams: dict[int, list[tuple[float, float]]] = {}
    for e in profiler.events():
        if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start:
            spans = streams.setdefault(e.device_resource_id, [])
            spans.append((e.time_range.start, e.time_range.end))
    if not streams or wall_us <= 0:
        return 0.0
    training = max(streams.values(), key=_covered)
    return min(1.0, _covered(training) / wall_us)


def connect(kind: str, device):
    """The benchmark's workers: see the module docstring's --workers."""
    if kind == "horovod":
        from training.torch.distributed import Horovod

        return Horovod()
    if kind == "ddp":
        import os
        import socket

        from training.torch.distributed import TorchDistributed

        with socket.socket() as s:  # a free port for the store of a world of one
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # torchrun's env:// variables for one worker (torch/distributed/run.py).
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
        return TorchDistributed()
    return OneProcess(device)


def threads_left(grace_s: float = 5.0) -> list[str]:
    """Daemon threads still alive `grace_s` after everything was closed: the interpreter does
    not join them at exit, so one may still run inside torch while the process tears down.
    (Closed queues' feeder threads end within the grace; non-daemon threads, such as
    torch.compile's ThreadPoolExecutor workers, are joined by the interpreter before it exits.)"""
    import threading

    deadline = time.monotonic() + grace_s
    for thread in threading.enumerate():
        if thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in threading.enumerate() if t.daemon and t.is_alive()]


def run(args) -> dict:
    import torch

    from training.torch.train import Data

    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
        torch.backends.cudnn.benchmark = True  # as training.torch.train.worker_device sets it
    targs = training_args(args)
    workers = connect(args.workers, device)
    data = Data(targs, 0, 1, 1, device)
    try:
        row = measure(args, targs, workers, data, device)
    finally:  # in order: the data stream's thread and loader workers, then the workers
        data.close()
        workers.close()
    left = threads_left()
    if left:
        raise SystemExit(f"error: daemon threads still running at the end: {', '.join(left)}")
    return row


def measure(args, targs, workers, data, device) -> dict:
    import torch

    from training.torch.train import Trainer

    trainer = Trainer(targs, workers)
    if args.weights_channels_last:
        trainer.model.to(memory_format=torch.channels_last)
    trainer.set_lr(0.0)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        trainer.step(data.train)
    sync()
    if args.sync_debug:  # from here on a host sync inside a step raises
        torch.cuda.set_sync_debug_mode("error")
    start = time.perf_counter()
    for _ in range(args.steps):
        trainer.step(data.train)
    if args.sync_debug:
        torch.cuda.set_sync_debug_mode("default")
    sync()
    seconds = time.perf_counter() - start
    share = None
    if args.profile_steps and device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            began = time.perf_counter()
            for _ in range(args.profile_steps):
                trainer.step(data.train)
            sync()
            wall_us = (time.perf_counter() - began) * 1e6
        share = kernel_share(prof, wall_us)
    images = args.steps * args.batch_size
    return {
        "label": args.label or args.data,
        "data": args.data,
        "decode": args.decode if args.data == "real" else None,
        "data_workers": getattr(data, "_records", None) and data._records.workers,
        "model": args.model,
        "image_size": args.image_size,
        "batch": args.batch_size,
        "precision": args.precision,
        "channels_last": args.channels_last,
        "weights_channels_last": args.weights_channels_last,
        "compile": args.compile,
        # PyTorch's backend override (torch/_dynamo/config.py), which the kit's smoke run sets.
        "backend_override": os.environ.get("TORCH_COMPILE_OVERRIDE_BACKENDS") or None,
        "workers": args.workers,
        "sync_debug": args.sync_debug,
        "timed_steps": args.steps,
        "images_per_sec": images / seconds,
        "kernel_time_share": share,
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
    }


def main(argv=None) -> int:
    args = parse(argv)
    if args.data == "real" and not Path(args.data_dir).is_dir():  # before torch's import
        sys.exit(
            f"error: --data-dir '{args.data_dir}' is not a folder; allowed: a folder of "
            "TFRecord shards (benchmarks/gpu/prep.sh writes one into .gpu-carry/data)"
        )
    print(json.dumps(run(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
