"""The ledger of a local run (`azdl train`): its events' folder, handed to the workers, each
attempt's timeline kept beside the events (`attempt-<name>.json`: an `azdl train --run-dir` of an
earlier run adds an attempt), and the ledger printed at the end. One machine: one node, no GPU
priced."""

import json
import os
import time
from pathlib import Path

from azdl import ledger
from azdl.errors import AzdlError
from training import events

EVENTS_DIR = "events"  # inside the run's folder


ATTEMPT_ENV = events.ATTEMPT_ENV


def environment(events_dir: Path) -> dict[str, str]:
    """What the workers need to write their events: the folder, this attempt's name."""
    attempt = f"local-{time.strftime('%Y%m%dT%H%M%S')}"
    return {events.DIR_ENV: str(events_dir), ATTEMPT_ENV: attempt}


def record_start(events_dir: Path, name: str, start_ms: int) -> None:
    """The attempt has started, in this process (`azdl jobs watch --events-dir` follows it while
    this process lives; `record_attempt` replaces the record at the end)."""
    _write(events_dir, name, {"name": name, "start_ms": start_ms, "pid": os.getpid()})


def record_attempt(events_dir: Path, attempt: ledger.Attempt) -> None:
    _write(events_dir, attempt.name, attempt.__dict__)


def _write(events_dir: Path, name: str, record: dict) -> None:
    """Whole or not at all: `azdl jobs watch` may be reading it."""
    events_dir.mkdir(parents=True, exist_ok=True)
    path = events_dir / f"attempt-{name}.json"
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record, sort_keys=True))
    partial.replace(path)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def timeline(events_dir: Path, now_ms: int, found: list[dict]) -> list[tuple[ledger.Attempt, str]]:
    """Each attempt recorded in `events_dir`, in order, with its status: Completed or Failed as
    `azdl train` recorded it at the end; Running (until `now_ms`) while the `azdl train` that
    started it lives; Failed where that process ended without recording the end (killed), the
    attempt then ending at its last event (`found`: the folder's events). None recorded: an
    error."""
    paths = list(events_dir.glob("attempt-*.json"))
    if not paths:
        raise AzdlError(f"--events-dir {events_dir}: no attempt-*.json in it; expected the folder "
                        "`azdl train` names as it starts")  # fmt: skip
    rows = []
    for path in paths:
        record = json.loads(path.read_text())
        if "end_ms" in record:
            attempt = ledger.Attempt(**record)
            rows.append((attempt, "Failed" if attempt.failed else "Completed"))
            continue
        name, start = record["name"], record["start_ms"]
        if alive(record["pid"]):
            rows.append((ledger.Attempt(name, start, max(now_ms, start), 1, False), "Running"))
        else:
            end = max([e["t_ms"] for e in found if e["attempt"] == name], default=start)
            rows.append((ledger.Attempt(name, start, max(end, start), 1, True), "Failed"))
    return sorted(rows, key=lambda row: row[0].start_ms)


def book(events_dir: Path) -> tuple[ledger.Ledger, list[dict]]:
    """(the ledger of every attempt recorded in `events_dir`, a running one until now, their
    events)."""
    found = events.read(events_dir)
    rows = timeline(events_dir, ledger.now_ms(), found)
    return ledger.ledger([attempt for attempt, _status in rows], found), found


def report(events_dir: Path) -> list[str]:
    """The ledger of every attempt recorded in `events_dir`, as lines."""
    return ledger.lines(book(events_dir)[0], gpus_per_node=0, usd_per_node_hour=None)
