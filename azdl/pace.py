"""Training's pace from its events (training.events): each step batch's steps and samples per
second, for `azdl jobs report` (throughput over time) and `azdl jobs watch` (the rate now).

A batch (a `steps` line) counts the steps since the process's previous step line, its first step
or its last checkpoint's end (the steps before a checkpoint are written before it starts), so
its time is from that event to the batch's last step: a checkpoint's stall is not in it."""

from dataclasses import dataclass

# The events after which a process's next batch is counted.
SINCE = ("first_step", "steps", "checkpoint_end")


@dataclass(frozen=True)
class Pace:
    attempt: str
    t_ms: int  # when the batch's last step was done
    step: int
    steps_per_s: float
    samples_per_s: float


def paces(events: list[dict]) -> list[Pace]:
    """One Pace per step batch, in time order (a batch done in no measurable time is skipped)."""
    since: dict[tuple, int] = {}
    found = []
    for event in sorted(events, key=lambda e: e["t_ms"]):
        key = (event["attempt"], event.get("round", 0), event.get("process"))
        if event["event"] == "steps" and key in since:
            seconds = (event["t_ms"] - since[key]) / 1000
            if seconds > 0:
                rates = (event["steps"] / seconds, event["samples"] / seconds)
                found.append(Pace(event["attempt"], event["t_ms"], event["step"], *rates))
        if event["event"] in SINCE:
            since[key] = event["t_ms"]
    return found
