"""The ledger of a local run (`azdl train`): its events' folder, handed to the workers, each
attempt's timeline kept beside the events (`attempt-<name>.json`: an `azdl train --run-dir` of an
earlier run adds an attempt), and the ledger printed at the end. One machine: one node, no GPU
priced."""

import json
import time
from pathlib import Path

from azdl import ledger
from training import events

EVENTS_DIR = "events"  # inside the run's folder


ATTEMPT_ENV = events.ATTEMPT_ENV


def environment(events_dir: Path) -> dict[str, str]:
    """What the workers need to write their events: the folder, this attempt's name."""
    attempt = f"local-{time.strftime('%Y%m%dT%H%M%S')}"
    return {events.DIR_ENV: str(events_dir), ATTEMPT_ENV: attempt}


def record_attempt(events_dir: Path, attempt: ledger.Attempt) -> None:
    events_dir.mkdir(parents=True, exist_ok=True)
    path = events_dir / f"attempt-{attempt.name}.json"
    path.write_text(json.dumps(attempt.__dict__, sort_keys=True))


def attempts(events_dir: Path) -> list[ledger.Attempt]:
    found = [ledger.Attempt(**json.loads(p.read_text()))
             for p in events_dir.glob("attempt-*.json")]  # fmt: skip
    return sorted(found, key=lambda a: a.start_ms)


def book(events_dir: Path) -> tuple[ledger.Ledger, list[dict]]:
    """(the ledger of every attempt recorded in `events_dir`, their events)."""
    found = events.read(events_dir)
    return ledger.ledger(attempts(events_dir), found), found


def report(events_dir: Path) -> list[str]:
    """The ledger of every attempt recorded in `events_dir`, as lines."""
    return ledger.lines(book(events_dir)[0], gpus_per_node=0, usd_per_node_hour=None)
