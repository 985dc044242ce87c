"""What every training flavour shares, TensorFlow or not: CPU threads per worker, the
end-of-run throughput report and the error exit. The PyTorch flavour imports nothing else from
the TensorFlow side, so its image needs no TensorFlow."""

import os
import sys

from training import throughput
from training.errors import TrainingError


def worker_threads(args, local_size: int) -> int:
    """CPU threads for this worker's input pipeline (and PyTorch's ops): `--threads`, else the
    cores this process may run on shared out among the node's `local_size` workers (at least
    one). A launcher that pins each rank to a socket or core has already shared them out, so the
    fallback then undercounts; `azdl submit` passes `--threads` (vCPUs per GPU) for that reason."""
    return args.threads or max(1, len(os.sched_getaffinity(0)) // local_size)


def report(args, framework, meter, data_source, workers, rank, checkpoint) -> dict | None:
    """Rank 0: the throughput lines (the contract in training.throughput), the checkpoint;
    returns the throughput record (None on the other ranks)."""
    if rank != 0:
        return None
    result = meter.result(
        framework=framework,
        model=args.model,
        image_size=args.image_size,
        batch_per_worker=args.batch_size,
        workers=workers,
        precision=args.precision,
        data_source=data_source,
        grad_accum=args.grad_accum,
    )
    for line in throughput.format_lines(result):
        print(line, flush=True)
    if checkpoint:
        print(f"Checkpoint: {checkpoint}", flush=True)
    return result


def run_main(train, args) -> int:
    """Run `train(args)`; bad input becomes `error: …` on stderr and exit code 2."""
    try:
        train(args)
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0
