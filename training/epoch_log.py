"""Every epoch's end, for all three flavours: each rank's step time and (PyTorch) own compute
time gathered, a straggler named, and rank 0's metrics to MLflow (training.metrics) beside the
TensorBoard logs (with training.live's figures), and to the run's events (training.events.epoch).
Every rank calls `end_epoch` (one small allgather per epoch); the lines and metrics:
docs/architecture.md ("Epoch log").
"""

import socket
import statistics
import time

from training import events, live, metrics

# A rank whose compute per step takes this many times the median rank's is a straggler (the
# PyTorch flavour's --straggler-factor).
STRAGGLER_FACTOR = 1.2


def stragglers(
    computes: list[tuple[int, str, float | None]], factor: float
) -> tuple[float, float, list[tuple[int, str, float, float]]] | None:
    """From every rank's (rank, host, compute s per step): the median rank's compute, the
    slowest rank's ratio to it, and each rank at `factor` times it or more as (rank, host,
    compute, ratio), slowest first; None when no rank timed a step (warm-up). The median rank is
    the lower middle one for an even count: of 2 ranks the slow one is held to the fast one."""
    timed = [t for t in computes if t[2] is not None]
    if not timed:
        return None
    median = statistics.median_low(t[2] for t in timed)
    ratio = {r: (c / median if median > 0 else 1.0) for r, _h, c in timed}
    slow = [(r, h, c, ratio[r]) for r, h, c in timed if ratio[r] >= factor]
    return median, max(ratio.values()), sorted(slow, key=lambda s: -s[3])


def compute_line(computes: list[tuple[int, str, float | None]], factor: float) -> str | None:
    """The epoch's straggler line, or None when no rank timed a step."""
    found = stragglers(computes, factor)
    if found is None:
        return None
    median, slowest, slow = found
    head = f"compute per step per rank (forward + backward): median {median:.4f} s"
    if not slow:
        return f"{head}, slowest {slowest:.2f}x - no straggler (at {factor:g}x)"
    named = "; ".join(f"rank {r} on {h} at {c:.4f} s ({x:.2f}x)" for r, h, c, x in slow)
    return f"{head} - straggler: {named}"


def stragglers_over_run(named: list[list[tuple[int, str, float]]], factor: float) -> str | None:
    """The run's summary from each timed epoch's stragglers [(rank, host, ratio), ...]."""
    if not named:
        return None
    epochs: dict[tuple[int, str], list[float]] = {}
    for epoch in named:
        for rank, host, ratio in epoch:
            epochs.setdefault((rank, host), []).append(ratio)
    if not epochs:
        return (
            f"stragglers over the run: none in {len(named)} epochs "
            f"(no rank's compute reached {factor:g}x the median rank's)"
        )
    ranked = sorted(epochs.items(), key=lambda item: (-len(item[1]), item[0]))
    return "stragglers over the run: " + "; ".join(
        f"rank {rank} on {host} in {len(ratios)} of {len(named)} epochs "
        f"(up to {max(ratios):.2f}x the median rank)"
        for (rank, host), ratios in ranked
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
    batch per worker × micro-batches per step. `straggler_factor`: where each rank times its own
    compute (`end_epoch`'s `compute`), the ratio to the median rank that names a straggler;
    None: the flavour does not, and rank 0 says so once."""

    def __init__(
        self,
        args,
        framework,
        rank,
        size,
        allgather_object,
        images_per_rank_step,
        straggler_factor: float | None = None,
    ):
        self.rank, self.gather, self.framework = rank, allgather_object, framework
        self.factor = straggler_factor
        self.images_per_rank_step = images_per_rank_step
        self.total_epochs = args.epochs
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
        self._named: list[list[tuple[int, str, float]]] = []  # per timed epoch: its stragglers
        self._untimed_said = False

    def begin_epoch(self) -> None:
        self._started = time.perf_counter()

    def end_epoch(self, epoch: int, values: dict[str, float], meter, compute=None) -> None:
        """`epoch`: epochs done (1-based). `meter`: this rank's ThroughputMeter. `compute`: this
        rank's own compute s per step in the epoch (training.torch.compute_clock), or None."""
        took = time.perf_counter() - self._started
        durations = meter.take_epoch()
        median = statistics.median(durations) if durations else None
        times = self.gather((self.rank, self.host, median, compute))
        if self.rank != 0:
            return
        logged = dict(values) | {"epoch_time_s": took}
        timed_before = len(self._named)
        logged |= self._stragglers([(r, h, c) for r, h, _m, c in times])
        timed = [(r, h, m) for r, h, m, _c in times if m is not None]
        if median:
            logged["images_per_sec"] = self.images_per_rank_step * len(times) / median
        # The run's events (the ledger's report and watch): the metrics and this epoch's
        # stragglers ([] for none, None where the flavour or the warm-up timed no rank).
        named = self._named[-1] if len(self._named) > timed_before else None
        shown = dict(values) | {k: logged[k] for k in ("epoch_time_s", "images_per_sec")
                                if k in logged}  # fmt: skip
        at = events.epoch(epoch, shown, named)
        logged |= {f"step_time_s.rank_{r}": m for r, _h, m in timed}
        nodes = node_throughput(timed, self.images_per_rank_step)
        logged |= {f"images_per_sec.node_{host}": rate for host, rate in nodes.items()}
        logged |= live.now(self.total_epochs - epoch, took, at)  # what `azdl jobs watch` shows
        self.run.log(logged, step=epoch)

    def _stragglers(self, computes) -> dict[str, float]:
        """Rank 0: the epoch's straggler line; its metrics for MLflow."""
        if self.factor is None:
            if not self._untimed_said:
                self._untimed_said = True
                print(
                    f"stragglers: not timed by the {self.framework} flavour "
                    "(docs/jobs.md, Stragglers)",
                    flush=True,
                )
            return {}
        found = stragglers(computes, self.factor)
        if found is None:
            return {}
        print(compute_line(computes, self.factor), flush=True)
        _median, slowest, slow = found
        self._named.append([(r, h, x) for r, h, _c, x in slow])
        logged = {f"compute_time_s.rank_{r}": c for r, _h, c in computes if c is not None}
        return logged | {"compute_ratio_max": slowest, "stragglers": len(slow)}

    def close(self, result: dict | None = None) -> None:
        """Rank 0: the stragglers over the run (also an MLflow tag), the run's throughput record
        (training.throughput) as `run_*` metrics, then the end of the MLflow run."""
        line = stragglers_over_run(self._named, self.factor) if self.factor else None
        if line:
            print(line, flush=True)
            ranks = {f"rank {r} on {h}" for epoch in self._named for r, h, _x in epoch}
            self.run.tag("stragglers", ", ".join(sorted(ranks)) or "none")
        if result:
            keys = ("images_per_sec", "images_per_sec_per_worker", "median_step_time_s")
            self.run.log({f"run_{k}": result.get(k) for k in keys}, step=0)
        self.run.close()
