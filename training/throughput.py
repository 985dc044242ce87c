"""The throughput contract: what rank 0 prints at the end of every run, and its parser (stdlib).

    Total images/sec: 123.4 (2 workers × 61.7, median step 0.518 s, 90 timed steps)
    {"schema": "azdl.throughput/v1", "framework": "keras", ...}

Only images of timed optimizer steps count, divided by the time those steps took
(docs/architecture.md, "Throughput"); the JSON fields are only ever added to, never renamed.
"""

import json
import statistics
import time

SCHEMA = "azdl.throughput/v1"
FIELDS = (
    "schema",
    "framework",
    "model",
    "image_size",
    "batch_per_worker",
    "workers",
    "precision",
    "data_source",
    "images_per_sec",
    "images_per_sec_per_worker",
    "median_step_time_s",
    "warmup_steps",
    "timed_steps",
    "images_timed",
    "wall_time_s",
    "grad_accum",
    "timed_span_s",
)


class ThroughputMeter:
    """Times training steps with `begin()`/`end()`; the first `warmup_steps` are not counted.

    A step is one optimizer step; `images_per_step` is what it processes on all workers
    together: batch per worker × micro-batches per step × workers.
    """

    def __init__(self, images_per_step: int, warmup_steps: int, clock=time.perf_counter):
        self.images_per_step = images_per_step
        self.warmup_steps = warmup_steps
        self._clock = clock
        self._steps = 0
        self._durations: list[float] = []
        self._first_begin: float | None = None
        self._first_timed_begin: float | None = None
        self._last_end: float | None = None
        self._begin: float | None = None
        self._epoch_start = 0

    def begin(self) -> None:
        self._begin = self._clock()
        if self._first_begin is None:
            self._first_begin = self._begin

    def end(self) -> None:
        if self._begin is None:
            raise RuntimeError("ThroughputMeter.end() without begin()")
        self._last_end = self._clock()
        self._steps += 1
        if self._steps > self.warmup_steps:
            self._durations.append(self._last_end - self._begin)
            if self._first_timed_begin is None:
                self._first_timed_begin = self._begin
        self._begin = None

    @property
    def steps(self) -> int:
        return self._steps

    def take_epoch(self) -> list[float]:
        """The timed step durations since the last call (an epoch's, for per-rank step times)."""
        durations = self._durations[self._epoch_start :]
        self._epoch_start = len(self._durations)
        return durations

    def result(
        self,
        *,
        framework: str,
        model: str,
        image_size: int,
        batch_per_worker: int,
        workers: int,
        precision: str,
        data_source: str,
        grad_accum: int,
    ) -> dict:
        """The JSON record; rates are None when every step was a warm-up step."""
        timed = len(self._durations)
        images = timed * self.images_per_step
        seconds = sum(self._durations)
        rate = images / seconds if timed and seconds > 0 else None
        wall = (self._last_end - self._first_begin) if self._last_end is not None else 0.0
        span = (self._last_end - self._first_timed_begin) if timed else None
        return {
            "schema": SCHEMA,
            "framework": framework,
            "model": model,
            "image_size": image_size,
            "batch_per_worker": batch_per_worker,
            "workers": workers,
            "precision": precision,
            "data_source": data_source,
            "images_per_sec": _round(rate),
            "images_per_sec_per_worker": _round(rate / workers if rate else None),
            "median_step_time_s": _round(statistics.median(self._durations) if timed else None, 6),
            "warmup_steps": min(self.warmup_steps, self._steps),
            "timed_steps": timed,
            "images_timed": images,
            "wall_time_s": _round(wall, 3),
            "grad_accum": grad_accum,
            "timed_span_s": _round(span, 3),
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def format_lines(result: dict) -> list[str]:
    """The human line and the JSON line, in that order."""
    if result["images_per_sec"] is None:
        human = (
            f"Total images/sec: n/a (all {result['warmup_steps']} steps were warm-up steps; "
            "run more steps than --timing-warmup-steps)"
        )
    else:
        human = (
            f"Total images/sec: {result['images_per_sec']:.1f} "
            f"({result['workers']} workers × {result['images_per_sec_per_worker']:.1f}, "
            f"median step {result['median_step_time_s']:.3f} s, "
            f"{result['timed_steps']} timed steps)"
        )
    return [human, json.dumps(result, sort_keys=False)]


def parse_throughput_lines(text: str) -> list[dict]:
    """Every `azdl.throughput/v1` JSON record in `text` (a log), in order of appearance.

    Lines may carry a launcher prefix such as `[1,0]<stdout>:`; the record starts at the first `{`.
    """
    records = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0 or SCHEMA not in line:
            continue
        try:
            record = json.loads(line[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("schema") == SCHEMA:
            records.append(record)
    return records
