"""Each rank's own compute per optimizer step: forward and backward up to where the gradients'
collective begins. In synchronous data parallelism every rank's step time equals the slowest
rank's, so only this part of the step shows a straggler. On a GPU: CUDA events on the compute
stream, read once per epoch (no host sync per step). On the CPU: the training thread's CPU time
(time.thread_time), which neither waiting for other ranks nor the other processes on the machine
add to. Not the whole process's: Horovod's background thread spends CPU time coordinating with
the other ranks while this one computes. What each launcher lets it time, and the limits:
docs/jobs.md, "Stragglers".
"""

import statistics
import time

import torch


class ComputeClock:
    """`start()` before each micro-batch's forward, `stop()` after its backward, `end_step()`
    after each optimizer step; `cut()` where the gradients' collective begins inside backward
    (DDP's communication hook, once per bucket: the last cut of a micro-batch ends its compute).
    The first `warmup_steps` steps are left out, as in the throughput figures."""

    def __init__(self, device: torch.device, warmup_steps: int):
        self.cuda = device.type == "cuda"
        self.warmup_steps = warmup_steps
        self._steps = 0  # optimizer steps ended, over the run
        self._start = self._cut = None
        self._parts: list = []  # this step's micro-batches: (start, end) marks
        self._epoch: list[list] = []  # this epoch's timed steps, each its micro-batches' marks

    def _now(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()  # on the current stream: the one the model's kernels run on
            return event
        # The CPU's backward runs on the thread that called it, DDP's hook included.
        return time.thread_time()

    def start(self) -> None:
        self._start, self._cut = self._now(), None

    def cut(self) -> None:
        if self._start is not None:
            self._cut = self._now()

    def stop(self) -> None:
        end = self._cut if self._cut is not None else self._now()
        self._parts.append((self._start, end))
        self._start = self._cut = None

    def end_step(self) -> None:
        if self._steps >= self.warmup_steps:
            self._epoch.append(self._parts)
        self._parts = []
        self._steps += 1

    def take_epoch(self) -> float | None:
        """The median timed step's compute s since the last call (a one-off pause, such as a
        garbage collection, does not make a straggler); None: no step timed (warm-up). On a GPU
        this waits for the epoch's last event: one host sync per epoch."""
        if not self._epoch:
            return None
        if self.cuda:
            self._epoch[-1][-1][1].synchronize()
            steps = [sum(a.elapsed_time(b) for a, b in parts) / 1000.0 for parts in self._epoch]
        else:
            steps = [sum(b - a for a, b in parts) for parts in self._epoch]
        self._epoch = []
        return statistics.median(steps)
