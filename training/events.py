"""The run's events, which `azdl jobs ledger` and `azdl train` turn into a ledger of where its
node-hours went (azdl.ledger). Rank 0 appends JSON lines to AZDL_EVENTS_DIR (the job's logs
output on Azure ML, the run's folder locally), one file per process (attempt, torchrun restart
round, host and pid in its name), so that every attempt's events are kept. Every built-in
flavour calls it; a user's script may:

    from training import events
    events.started()                       # the workers have met (after init_process_group)
    events.restored(step, seconds)         # resumed from a checkpoint at optimizer step `step`
    events.step(global_step, samples)      # after each optimizer step (batched: cheap)
    with events.checkpoint(global_step):   # around writing a checkpoint
        save(...)
    events.epoch(epoch, {"loss": loss})    # an epoch's metrics (the built-in ones: epoch_log)
    events.end(global_step)                # training finished
    events.rank_is(hvd.rank())             # Horovod elastic: after each reset (ranks move)

Nothing is written when AZDL_EVENTS_DIR is unset or on other ranks (RANK under torchrun,
OMPI_COMM_WORLD_RANK under MPI, HOROVOD_RANK under horovodrun; NODE_RANK for a node's own
command). A background thread writes: a step never waits for the file system, and a write that
fails (OSError) is counted and reported once at exit, never raised. Step lines are written in
batches (what is pending, at exit); the last step itself goes, at every step, into a small
`.last` record beside the file, overwritten in place, so that a rank 0 killed without warning
(SIGKILL, as mpirun and a torn-down container end it) still tells how far it got. Stdlib only.
"""

import atexit
import contextlib
import json
import math
import numbers
import os
import queue
import socket
import sys
import threading
import time
from pathlib import Path

DIR_ENV = "AZDL_EVENTS_DIR"
ATTEMPT_ENV = "AZDL_ATTEMPT"  # locally; on Azure ML the job's name, AZUREML_RUN_ID
ROUND_ENV = "TORCHELASTIC_RESTART_COUNT"  # torchrun's restart round (0 without torchrun)
RANK_ENVS = ("RANK", "OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK", "NODE_RANK")
# Step lines at most this often (on Azure ML the folder is a blob mount, where each append
# uploads); what is pending is written at exit too.
STEP_LINE_S = 5.0
# The size of the `.last` record, overwritten in place at every step.
LAST_RECORD_BYTES = 256
# How long the exit waits for the writer to finish (a hung mount must not hang the exit).
EXIT_WAIT_S = 10.0


def attempt() -> str:
    return os.environ.get(ATTEMPT_ENV) or os.environ.get("AZUREML_RUN_ID") or "local"


def restart_round() -> int:
    return int(os.environ.get(ROUND_ENV) or 0)


def file_name(attempt_name: str, round_: int, process: str) -> str:
    return f"events-{attempt_name}-round-{round_}-{process}.jsonl"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    """One process's events file, written by a daemon thread from a queue."""

    def __init__(self, folder: Path, attempt_name: str, round_: int):
        # torchrun's restart count is each node's own (a node whose worker was only stopped
        # does not count a restart): a process is told apart by its host and pid.
        process = f"{socket.gethostname()}-{os.getpid()}"
        self.path = Path(folder) / file_name(attempt_name, round_, process)
        self.base = {"attempt": attempt_name, "round": round_, "process": process}
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.dropped = 0
        self.last_step: int | None = None
        self.last_step_ms = 0
        self.pending = 0  # samples since the last step line
        self.pending_steps = 0
        self.line_due = 0.0
        self.first_step_ms: int | None = None  # when this process's first step ended
        self.checkpoint_ms = 0  # time spent writing checkpoints (training.live)
        self.ended = False
        self.writer = threading.Thread(target=self._write, name="azdl-events", daemon=True)
        self.writer.start()
        self.last_fd: int | None = None  # the .last record (`_record_step`)

    def emit(self, event: str, t_ms: int | None = None, **fields) -> None:
        record = {"t_ms": now_ms() if t_ms is None else t_ms, "event": event, **self.base, **fields}
        self.lines.put(json.dumps(record, sort_keys=True))

    def _write(self) -> None:
        done = False
        while not done:
            batch = [self.lines.get()]
            while not self.lines.empty():
                batch.append(self.lines.get())
            done = None in batch
            text = "".join(f"{line}\n" for line in batch if line is not None)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    f.write(text)
            except OSError:
                self.dropped += len(batch) - done

    def _record_step(self, global_step: int) -> None:
        """Overwrite this process's `.last` record with the step just done: one pwrite of a
        fixed-size record per step (into the page cache, or a blob mount's local file cache),
        which a SIGKILL cannot lose, unlike the batched lines still in memory."""
        try:
            if self.last_fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.last_fd = os.open(self.path.with_suffix(".last"), os.O_WRONLY | os.O_CREAT)
            record = json.dumps({"t_ms": now_ms(), "step": global_step, **self.base})
            os.pwrite(self.last_fd, record.ljust(LAST_RECORD_BYTES).encode(), 0)
        except OSError:
            self.dropped += 1

    def step(self, global_step: int, samples: int) -> None:
        if self.last_step is None:
            self.first_step_ms = now_ms()
            self.emit("first_step", self.first_step_ms, step=global_step, samples=samples)
            self.line_due = time.monotonic() + STEP_LINE_S
        else:
            self.pending += samples
            self.pending_steps += 1
        self.last_step, self.last_step_ms = global_step, now_ms()
        self._record_step(global_step)
        if self.pending_steps and time.monotonic() >= self.line_due:
            self.flush_steps()

    def flush_steps(self) -> None:
        if self.pending_steps:
            self.emit(
                "steps",
                self.last_step_ms,
                step=self.last_step,
                steps=self.pending_steps,
                samples=self.pending,
            )  # when the last of them was done
            self.pending = self.pending_steps = 0
        self.line_due = time.monotonic() + STEP_LINE_S

    def close(self) -> None:
        if not self.writer.is_alive():  # closed already (by the test, then at exit)
            return
        self.flush_steps()
        if not self.ended:
            self.emit("exit", step=self.last_step)
        self.lines.put(None)
        self.writer.join(EXIT_WAIT_S)
        if self.writer.is_alive():
            print(f"azdl events: {self.path} still not written after {EXIT_WAIT_S:g} s; "
                  "the ledger of this run may miss its last events", file=sys.stderr)  # fmt: skip
        elif self.dropped:
            print(f"azdl events: {self.dropped} event lines could not be written to "
                  f"{self.path}; the ledger of this run misses them", file=sys.stderr)  # fmt: skip


_log: Log | None = None
_opened = False


def rank() -> int:
    """This process's rank, from its launcher's variables (RANK_ENVS); 0 without one."""
    for name in RANK_ENVS:
        if os.environ.get(name):
            return int(os.environ[name])
    return 0


def log() -> Log | None:
    """This process's events file; None where nothing is written (no folder, not rank 0)."""
    global _log, _opened
    if not _opened:
        _opened = True
        folder = os.environ.get(DIR_ENV)
        if folder and rank() == 0:
            _log = Log(Path(folder), attempt(), restart_round())
            atexit.register(_log.close)
    return _log


def rank_is(rank_now: int) -> None:
    """Horovod elastic, at each (re)start of the training function: this process's rank now. A
    reset renumbers the ranks (rank 0 may be the worker that left), so rank 0 writes the events
    from here on, in a file of its own, and a process that is no longer rank 0 stops writing."""
    global _log
    current = log()
    if rank_now == 0 and current is None and os.environ.get(DIR_ENV):
        _log = Log(Path(os.environ[DIR_ENV]), attempt(), restart_round())
        atexit.register(_log.close)
        _log.emit("started")
    elif rank_now != 0 and current is not None:
        current.ended = True  # still running: no `exit` event
        current.close()
        _log = None


def started() -> None:
    """The workers have met (rendezvous, init_process_group or hvd.init done)."""
    if (events := log()) is not None:
        events.emit("started")


def restored(global_step: int, seconds: float) -> None:
    """Resumed from a checkpoint at optimizer step `global_step`, loaded in `seconds`."""
    if (events := log()) is not None:
        events.emit("restore", step=global_step, ms=round(seconds * 1000))


def step(global_step: int, samples: int = 0) -> None:
    """Optimizer step `global_step` is done, `samples` samples in it (all ranks together)."""
    if (events := log()) is not None:
        events.step(global_step, samples)


@contextlib.contextmanager
def checkpoint(global_step: int):
    """Around writing the checkpoint of optimizer step `global_step`."""
    events = log()
    if events is not None:
        events.flush_steps()
        began = now_ms()
        events.emit("checkpoint_start", began, step=global_step)
    yield
    if events is not None:
        ended = now_ms()
        events.checkpoint_ms += ended - began
        events.emit("checkpoint_end", ended, step=global_step)


def epoch(number: int, values: dict, stragglers: list[tuple[int, str, float]] | None = None
          ) -> int | None:  # fmt: skip
    """Epoch `number` (1-based) ended, with its metrics (`values`: loss and the rest, as the
    flavour logs them; a value that is not a finite number is left out) and, where the flavour
    times each rank, its stragglers as (rank, host, compute ratio to the median rank), [] for
    none; None: not timed. Returns the event's time (None: nothing written)."""
    if (events := log()) is None:
        return None
    finite = {k: float(v) for k, v in values.items()
              if isinstance(v, numbers.Real) and math.isfinite(v)}  # fmt: skip
    named = None if stragglers is None else [
        {"rank": r, "host": h, "ratio": round(x, 3)} for r, h, x in stragglers]  # fmt: skip
    at = now_ms()
    events.emit("epoch", at, epoch=number, step=events.last_step, values=finite,
                stragglers=named)  # fmt: skip
    return at


def end(global_step: int) -> None:
    """Training finished at optimizer step `global_step`."""
    if (events := log()) is not None:
        events.flush_steps()
        events.emit("end", step=global_step)
        events.ended = True


def node_up() -> None:
    """The attempt's command has started on node 0 (before the health gate and the pip step):
    where the ledger's startup begins."""
    if (events := log()) is not None:
        events.emit("up")
        events.ended = True  # this process is not the training


def read(folder: Path) -> list[dict]:
    """Every event in `folder` and below, every attempt and process, in time order (a torn
    last line of a killed writer is skipped)."""
    found = []
    for path in sorted(Path(folder).rglob("events-*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                found.append(json.loads(line))
    for path in sorted(Path(folder).rglob("events-*.last")):  # each process's last step
        with contextlib.suppress(json.JSONDecodeError):
            found.append(json.loads(path.read_text()) | {"event": "last_step"})
    return sorted(found, key=lambda e: e["t_ms"])


if __name__ == "__main__":  # python -m training.events up: the job's first step
    if sys.argv[1:] != ["up"]:
        sys.exit("usage: python -m training.events up")
    node_up()
