"""Every epoch's end, for all three flavours: each rank's step time gathered, a straggler named,
and rank 0's metrics to MLflow (training.metrics) beside the TensorBoard logs. Every rank calls
`end_epoch` (one small allgather per epoch); the lines and metrics: docs/architecture.md
("Epoch log").
"""

import socket
import statistics
import time

from training import metrics

# A rank whose median step takes this much longer than the median rank's is named a straggler.
STRAGGLER_RATIO = 1.2


def step_time_line(times: list[tuple[int, str, float | None]]) -> str | None:
    """The straggler line from every rank's (rank, host, median step time s), or None when no
    rank timed a step this epoch (warm-up)."""
    timed = [t for t in times if t[2] is not None]
    if not timed:
        return None
    median = statistics.median(t[2] for t in timed)
    rank, host, slowest = max(timed, key=lambda t: t[2])
    ratio = slowest / median if median > 0 else 1.0
    line = (
        f"step time per rank: median {median:.3f} s; slowest rank {rank} on {host} at "
        f"{slowest:.3f} s ({ratio:.2f}x)"
    )
    return line + (" - straggler" if ratio >= STRAGGLER_RATIO else "")


def slowest_over_run(slowest: list[tuple[int, str, float]]) -> str | None:
    """The summary line from each epoch's (slowest rank, its host, ratio to the median rank)."""
    if not slowest:
        return None
    counts: dict[tuple[int, str], int] = {}
    for rank, host, _ratio in slowest:
        counts[(rank, host)] = counts.get((rank, host), 0) + 1
    (rank, host), times = max(counts.items(), key=lambda item: item[1])
    worst = max(ratio for r, h, ratio in slowest if (r, h) == (rank, host))
    return (
        f"slowest rank over the run: rank {rank} on {host} in {times} of {len(slowest)} epochs "
        f"(up to {worst:.2f}x the median rank)"
    )


def node_throughput(times, images_per_rank_step: int) -> dict[str, float]:
    """Images/s of each node: the sum over its ranks of images per step / median step time."""
    nodes: dict[str, float] = {}
    for _rank, host, median in times:
        if median:
            nodes[host] = nodes.get(host, 0.0) + images_per_rank_step / median
    return nodes


class EpochLog:
    """`begin_epoch()` then `end_epoch(epoch, values, meter)` on every rank; `close()` at the end.

    `allgather_object`: Horovod's (horovod.torch or horovod.tensorflow). `images_per_rank_step`:
    batch per worker × micro-batches per step."""

    def __init__(self, args, framework, rank, size, allgather_object, images_per_rank_step):
        self.rank, self.gather = rank, allgather_object
        self.images_per_rank_step = images_per_rank_step
        self.host = socket.gethostname()
        self.run = metrics.start(
            rank,
            run_name=f"{framework}-{args.model}-{size}w-{time.strftime('%Y%m%d-%H%M%S')}",
            params={
                "framework": framework,
                "model": args.model,
                "workers": size,
                "batch_per_worker": args.batch_size,
                "grad_accum": args.grad_accum,
                "image_size": args.image_size,
                "precision": args.precision,
                "epochs": args.epochs,
            },
        )
        self._started = time.perf_counter()
        self._slowest: list[tuple[int, str, float]] = []  # per epoch: rank, host, ratio

    def begin_epoch(self) -> None:
        self._started = time.perf_counter()

    def end_epoch(self, epoch: int, values: dict[str, float], meter) -> None:
        """`epoch`: epochs done (1-based). `meter`: this rank's ThroughputMeter."""
        took = time.perf_counter() - self._started
        durations = meter.take_epoch()
        median = statistics.median(durations) if durations else None
        times = self.gather((self.rank, self.host, median))
        if self.rank != 0:
            return
        line = step_time_line(times)
        if line:
            print(line, flush=True)
        timed = [t for t in times if t[2] is not None]
        if timed:
            rank, host, slowest = max(timed, key=lambda t: t[2])
            middle = statistics.median(t[2] for t in timed)
            self._slowest.append((rank, host, slowest / middle if middle > 0 else 1.0))
        logged = dict(values) | {"epoch_time_s": took}
        if median:
            logged["images_per_sec"] = self.images_per_rank_step * len(times) / median
        logged |= {f"step_time_s.rank_{r}": m for r, _h, m in timed}
        nodes = node_throughput(times, self.images_per_rank_step)
        logged |= {f"images_per_sec.node_{host}": rate for host, rate in nodes.items()}
        self.run.log(logged, step=epoch)

    def close(self, result: dict | None = None) -> None:
        """Rank 0: the slowest rank over the run, the run's throughput record
        (training.throughput) as `run_*` metrics, then the end of the MLflow run."""
        line = slowest_over_run(self._slowest)
        if line:
            print(line, flush=True)
        if result:
            keys = ("images_per_sec", "images_per_sec_per_worker", "median_step_time_s")
            self.run.log({f"run_{k}": result.get(k) for k in keys}, step=0)
        self.run.close()
