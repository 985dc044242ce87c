"""The goodput ledger: where a job's billed node-time went, from its attempts' timelines and the
events its rank 0 wrote (training.events). A pure function; times are integer milliseconds, so
the buckets sum to the billed total exactly (docs/jobs.md, "The ledger").

Within an attempt, time from its start is `startup` until the first step of a training process;
then `productive`, except `checkpoint` (a checkpoint being written), `restore` (a checkpoint
being loaded) and `idle` (after the last sign of progress of a process until the next one
starts, or the attempt ends: a hang to its deadline, a crash's teardown, the end of the job).
Steps that a later process (a torchrun restart round, or a retry) did again because they came
after the checkpoint it resumed from are `recomputed`, as are a failed last attempt's steps after
its last checkpoint; their time moves from productive to recomputed.
"""

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

BUCKETS = ("productive", "recomputed", "restore", "checkpoint", "startup", "idle")
# What a bucket is called where it is shown.
LABELS = {
    "productive": "productive",
    "recomputed": "recomputed",
    "restore": "restore",
    "checkpoint": "checkpoint stall",
    "startup": "startup",
    "idle": "hang or idle",
}
MS_PER_HOUR = 3_600_000
# Events that show training moving on (after the last of a process, its time is idle).
# `last_step`: a process's `.last` record (training.events.read), its last step and when.
PROGRESS = ("first_step", "steps", "checkpoint_end", "last_step")


@dataclass(frozen=True)
class Attempt:
    """One billed attempt: `start_ms` to `end_ms` on `nodes` nodes (epoch milliseconds); the
    time from `created_ms` to `start_ms` is queueing, not billed. `failed`: it did not
    complete (its steps after its last checkpoint are lost unless a later attempt did them)."""

    name: str
    start_ms: int
    end_ms: int
    nodes: int
    failed: bool
    created_ms: int | None = None


@dataclass
class Ledger:
    attempts: list[Attempt]
    node_ms: dict[str, int]  # bucket -> node-milliseconds; sums to billed_node_ms
    billed_node_ms: int
    queue_ms: int  # wall-clock, not node-time: nodes are not billed while queued
    last_step: int | None
    recomputed_steps: int
    restores: list[dict] = field(default_factory=list)  # attempt, round, step
    checkpoint_ms: list[int] = field(default_factory=list)  # each checkpoint's duration

    @property
    def goodput(self) -> Fraction | None:
        if not self.billed_node_ms:
            return None
        return Fraction(self.node_ms["productive"], self.billed_node_ms)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _segments(attempts: list[Attempt], events: Iterable[dict]) -> list[tuple[Attempt, list]]:
    """(attempt, the events of one of its processes in time order), in the order the processes
    started (a torchrun restart round's rank 0 is a new process)."""
    by_key: dict[tuple[str, str], list[dict]] = {}
    for event in events:
        process = event.get("process", str(event.get("round", 0)))
        by_key.setdefault((event["attempt"], process), []).append(event)
    found = []
    for attempt in attempts:
        mine = [sorted(evs, key=lambda e: e["t_ms"]) for (name, _), evs in by_key.items()
                if name == attempt.name]  # fmt: skip
        found += [(attempt, evs) for evs in sorted(mine, key=lambda evs: evs[0]["t_ms"])]
        if not mine:
            found.append((attempt, []))
    return found


def _start_step(events: list[dict]) -> int | None:
    """The step a process started from: its restore's, 0 for a fresh start, None: no step."""
    for event in events:
        if event["event"] == "restore":
            return event["step"]
        if event["event"] == "first_step":
            return event["step"] - 1
    return None


def _points(events: list[dict]) -> list[tuple[int, str]]:
    """(time, bucket from then on) for one process's events."""
    points = []
    last_progress = None
    for event in events:
        t, kind = event["t_ms"], event["event"]
        if kind == "restore":
            points += [(t - event.get("ms", 0), "restore"), (t, "startup")]
        elif kind == "first_step":
            points.append((t, "productive"))
        elif kind == "checkpoint_start":
            points.append((t, "checkpoint"))
        elif kind == "checkpoint_end":
            points.append((t, "productive"))
        elif kind == "end":
            points.append((t, "idle"))
        if kind in PROGRESS:
            last_progress = t
    if last_progress is not None:
        points = [p for p in points if p[0] <= last_progress] + [(last_progress, "idle")]
    return points


def _reached_at(events: list[dict], step: int) -> int | None:
    """When the process had done `step` steps: its checkpoint of that step, else its first
    event at or past it; None when it started past it."""
    for event in events:
        if event["event"] == "checkpoint_end" and event.get("step") == step:
            return event["t_ms"]
    for event in events:
        if event["event"] in PROGRESS and (event.get("step") or 0) >= step:
            return event["t_ms"]
    return None


def last_step(events: list[dict]) -> int | None:
    """The last step `events` tell of (None: none)."""
    steps = [e["step"] for e in events if e["event"] in (*PROGRESS, "end", "exit")]
    steps = [s for s in steps if s is not None]
    return max(steps) if steps else None


def _last_checkpoint(events: list[dict]) -> int | None:
    done = [e["step"] for e in events if e["event"] == "checkpoint_end"]
    return max(done) if done else _start_step(events)


def _recompute(points, since: int, until: int) -> list[tuple[int, str]]:
    """`points` with productive time in [since, until] turned into recomputed."""
    holding = "startup"
    for t, bucket in points:
        if t <= since:
            holding = bucket
    out = [(t, b) for t, b in points if t < since] + [(since, holding)]
    out += [(t, b) for t, b in points if t >= since]
    return [(t, "recomputed" if b == "productive" and since <= t < until else b) for t, b in out]


def _clock(points: list[tuple[int, str]], start: int, end: int) -> dict[str, int]:
    """Milliseconds per bucket over [start, end]; the first bucket is startup."""
    spent = dict.fromkeys(BUCKETS, 0)
    t, bucket = start, "startup"
    for at, then in sorted(points, key=lambda p: p[0]):
        at = min(max(at, t), end)
        spent[bucket] += at - t
        t, bucket = at, then
    spent[bucket] += end - t
    return spent


def ledger(attempts: list[Attempt], events: Iterable[dict]) -> Ledger:
    """The ledger of `attempts` (in the order they ran) from their events (training.events)."""
    segments = _segments(attempts, events)
    points_of: dict[str, list] = {a.name: [] for a in attempts}
    recomputed_steps, restores, checkpoint_ms = 0, [], []
    for i, (attempt, evs) in enumerate(segments):
        points = _points(evs)
        later = [_start_step(e) for _, e in segments[i + 1 :] if _start_step(e) is not None]
        last = last_step(evs)
        if later:  # done again from the next process's start
            replay_from = later[0]
        elif attempt.failed:  # lost: after its last checkpoint
            replay_from = _last_checkpoint(evs)
        else:
            replay_from = None
        if last is not None and replay_from is not None and last > replay_from:
            recomputed_steps += last - replay_from
            since = _reached_at(evs, replay_from) or attempt.start_ms
            until = max((t for t, _ in points), default=since)  # the last progress
            points = _recompute(points, since, until)
        points_of[attempt.name] += points
        for e in evs:
            if e["event"] == "restore":
                restores.append({"attempt": attempt.name, "round": e["round"], "step": e["step"]})
        starts = {e["step"]: e["t_ms"] for e in evs if e["event"] == "checkpoint_start"}
        checkpoint_ms += [e["t_ms"] - starts[e["step"]] for e in evs
                          if e["event"] == "checkpoint_end" and e["step"] in starts]  # fmt: skip
    node_ms = dict.fromkeys(BUCKETS, 0)
    for attempt in attempts:
        spent = _clock(points_of[attempt.name], attempt.start_ms, attempt.end_ms)
        for bucket, ms in spent.items():
            node_ms[bucket] += ms * attempt.nodes
    billed = sum((a.end_ms - a.start_ms) * a.nodes for a in attempts)
    queue = sum(a.start_ms - a.created_ms for a in attempts if a.created_ms is not None)
    last_steps = [s for _, evs in segments if (s := last_step(evs)) is not None]
    return Ledger(
        list(attempts), node_ms, billed, queue, max(last_steps) if last_steps else None,
        recomputed_steps, restores, checkpoint_ms,
    )  # fmt: skip


def _hours(node_ms: int) -> Fraction:
    return Fraction(node_ms, MS_PER_HOUR)


def _attempt(a: Attempt) -> dict:
    queue = None if a.created_ms is None else a.start_ms - a.created_ms
    return {"name": a.name, "nodes": a.nodes, "failed": a.failed, "start_ms": a.start_ms,
            "end_ms": a.end_ms, "queue_ms": queue}  # fmt: skip


def document(book: Ledger, gpus_per_node: int, usd_per_node_hour: Fraction | None) -> dict:
    """The ledger as `--json` prints it: exact node-milliseconds per bucket, and node-hours,
    GPU-hours and USD rounded for reading (the milliseconds are what sums exactly)."""

    def figures(node_ms: int) -> dict:
        hours = _hours(node_ms)
        usd = None if usd_per_node_hour is None else round(float(hours * usd_per_node_hour), 2)
        return {"node_ms": node_ms, "node_hours": round(float(hours), 4),
                "gpu_hours": round(float(hours * gpus_per_node), 4), "usd": usd}  # fmt: skip

    goodput = book.goodput
    return {
        "attempts": [_attempt(a) for a in book.attempts],
        "buckets": {bucket: figures(book.node_ms[bucket]) for bucket in BUCKETS},
        "billed": figures(book.billed_node_ms),
        "queue_ms": book.queue_ms,
        "goodput_percent": None if goodput is None else round(float(goodput * 100), 2),
        "last_step": book.last_step,
        "recomputed_steps": book.recomputed_steps,
        "restores": book.restores,
        "checkpoint_ms": book.checkpoint_ms,
        "gpus_per_node": gpus_per_node,
        "usd_per_node_hour": None if usd_per_node_hour is None else float(usd_per_node_hour),
    }


def lines(book: Ledger, gpus_per_node: int, usd_per_node_hour: Fraction | None) -> list[str]:
    """The ledger as a table: each bucket's node-time, GPU-hours, USD and share."""
    billed = book.billed_node_ms
    names = ", ".join(f"{a.name} ({a.nodes} node{'s' * (a.nodes > 1)}"
                      f"{', failed' if a.failed else ''})" for a in book.attempts)  # fmt: skip
    head = f"{'bucket':<17}{'node-s':>12}{'GPU-h':>10}{'USD':>10}{'share':>8}"
    out = [f"ledger of {names}", head]
    for bucket in (*BUCKETS, "billed"):
        ms = billed if bucket == "billed" else book.node_ms[bucket]
        hours = _hours(ms)
        usd = "-" if usd_per_node_hour is None else f"{float(hours * usd_per_node_hour):.2f}"
        share = f"{float(Fraction(ms, billed) * 100):.1f}%" if billed else "-"
        label = "billed total" if bucket == "billed" else LABELS[bucket]
        out.append(f"{label:<17}{ms / 1000:>12.1f}{float(hours * gpus_per_node):>10.2f}"
                   f"{usd:>10}{share:>8}")  # fmt: skip
    goodput = book.goodput
    out.append(f"goodput: {'-' if goodput is None else f'{float(goodput * 100):.1f}%'}; "
               f"queued {book.queue_ms / 1000:.0f} s (not billed); last step "
               f"{book.last_step}; steps recomputed: {book.recomputed_steps}")  # fmt: skip
    for r in book.restores:
        out.append(f"restore: {r['attempt']} round {r['round']} resumed from step {r['step']}")
    if book.checkpoint_ms:
        mean = sum(book.checkpoint_ms) / len(book.checkpoint_ms) / 1000
        out.append(f"checkpoints: {len(book.checkpoint_ms)}, {mean:.2f} s each on average")
    return out
