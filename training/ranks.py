"""The job's folder of rank records, which training.guard writes for every rank (the job's logs
output on Azure ML, every node sees it; the run folder locally): `rank-<R>.json`, the rank's
host, at start; `exit-<R>-round-<N>.json`, its exit record (training.exits), at its end. Read
by the flight-recorder report and the stall lines to name hosts. Stdlib only."""

import json
import os
from pathlib import Path

from training import exits


def _write(path: Path, data: dict) -> None:
    """Written whole: a reader on another node never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    tmp.replace(path)


def record_host(ranks_dir: Path, rank: int, host: str) -> None:
    _write(ranks_dir / f"rank-{rank}.json", {"rank": rank, "host": host, "pid": os.getpid()})


def host_of(ranks_dir: Path, rank: int) -> str:
    path = ranks_dir / f"rank-{rank}.json"
    if not path.is_file():
        return f"host unknown: no {path}"
    return json.loads(path.read_text())["host"]


def save_exit(ranks_dir: Path, record: exits.Record) -> None:
    _write(ranks_dir / f"exit-{record.rank}-round-{record.round}.json", record.__dict__)


def exit_records(ranks_dir: Path) -> list[exits.Record]:
    return [exits.Record(**json.loads(p.read_text())) for p in ranks_dir.glob("exit-*.json")]
