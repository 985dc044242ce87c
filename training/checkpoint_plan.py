"""`--checkpoint-every-steps auto`: the checkpoint interval from the checkpoint's measured cost
and the job's mean time between failures, by Young's first-order optimum

    interval = sqrt(2 * C * MTBF)

(J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9),
1974). Daly (FGCS 22(3), 2006) adds higher-order terms, which matter when C is not small against
the MTBF; a checkpoint's seconds against an MTBF of days are. The job's MTBF is a node's over
the job's nodes (failures of independent nodes add up).

The node MTBF defaults to what Meta reported for Llama 3's pre-training ("The Llama 3 Herd of
Models", arXiv:2407.21783, section 3.3.4): 419 unexpected interruptions in a 54-day snapshot on
16,384 H100 GPUs, 2,048 nodes of 8, so 2,048 x 54 x 24 / 419 = 6,335 node-hours between
failures. `AZDL_NODE_MTBF_H` sets another; `azdl submit` sets it from the stack's own history
of jobs (azdl.jobs.node_mtbf).

Rank 0 plans (only rank 0 writes checkpoints): the first checkpoint after FIRST_STEPS steps
measures C (the extra time of the step it follows), every later one measures it again, and the
plan is re-made and printed, with its inputs, whenever the interval changes. Stdlib only.
"""

import math
import os
import statistics
import time
from collections import deque

from training import events
from training.errors import TrainingError

NODE_MTBF_ENV = "AZDL_NODE_MTBF_H"
NODE_MTBF_H = 2048 * 54 * 24 / 419  # Llama 3, section 3.3.4 (the docstring)
FIRST_STEPS = 20  # steps before the first checkpoint, which measures C
RECENT = 50  # step times kept for the median


def young_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Young's optimum interval between checkpoints, in seconds."""
    return math.sqrt(2 * cost_s * mtbf_s)


def _nodes() -> int:
    """The job's nodes from the launcher's world and local sizes (torchrun, MPI, Horovod)."""
    for world, local in (("WORLD_SIZE", "LOCAL_WORLD_SIZE"),
                         ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"),
                         ("HOROVOD_SIZE", "HOROVOD_LOCAL_SIZE")):  # fmt: skip
        if os.environ.get(world) and os.environ.get(local):
            return max(1, int(os.environ[world]) // int(os.environ[local]))
    return 1


class AutoInterval:
    """Decides, step by step, whether a checkpoint is due (`due`)."""

    def __init__(self, nodes: int, node_mtbf_h: float, say=print, clock=time.monotonic):
        self.mtbf_s = node_mtbf_h * 3600 / nodes
        self.nodes, self.node_mtbf_h, self.say, self.clock = nodes, node_mtbf_h, say, clock
        self.steps: deque[float] = deque(maxlen=RECENT)
        self.costs: list[float] = []
        self.last_call: float | None = None
        self.after_checkpoint = False
        self.every = FIRST_STEPS
        self.last_at: int | None = None  # the step of the last checkpoint (or before the first)

    def due(self, global_step: int) -> bool:
        now = self.clock()
        if self.last_at is None:  # a resumed run starts past 0: count from its first step
            self.last_at = global_step - 1
        if self.last_call is not None:
            gap = now - self.last_call
            if self.after_checkpoint and self.steps:
                self.costs.append(max(0.0, gap - statistics.median(self.steps)))
                self.replan()
            elif not self.after_checkpoint:
                self.steps.append(gap)
        self.last_call = now
        self.after_checkpoint = global_step - self.last_at >= self.every
        if self.after_checkpoint:
            self.last_at = global_step
        return self.after_checkpoint

    def replan(self) -> None:
        cost, step = statistics.mean(self.costs), statistics.median(self.steps)
        interval = young_interval_s(cost, self.mtbf_s)
        every = max(1, round(interval / step)) if step > 0 else self.every
        if every != self.every:
            self.every = every
            self.say(
                f"checkpoint every {every} steps: Young's sqrt(2 x C {cost:.3f} s x MTBF "
                f"{self.mtbf_s / 3600:,.0f} h ({self.nodes} node(s) of {self.node_mtbf_h:,.0f} "
                f"h)) = {interval:,.0f} s at {step:.4f} s per step",
            )


_plan: AutoInterval | None = None


def plan() -> AutoInterval:
    """This process's plan (made at its first use)."""
    global _plan
    if _plan is None:
        text = os.environ.get(NODE_MTBF_ENV) or str(NODE_MTBF_H)
        try:
            mtbf = float(text)
        except ValueError:
            mtbf = 0.0
        if not mtbf > 0:
            raise TrainingError(f"{NODE_MTBF_ENV}={text!r}: expected a node's hours between "
                                "failures, a number above 0")  # fmt: skip
        quiet = events.rank() != 0  # only rank 0 checkpoints: it says the plan
        _plan = AutoInterval(_nodes(), mtbf, say=(lambda line: None) if quiet else
                             (lambda line: print(line, flush=True)))  # fmt: skip
    return _plan
