"""Run local workers and report a failed one plainly: horovodrun's or torchrun's own traceback
after a failed worker becomes one line naming the rank and its exit code; other output passes
through."""

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from training.teardown import CURE, TEARDOWN_ABORT

# horovodrun --gloo's own ending after a failed worker: `RuntimeError: Horovod detected that one
# or more processes exited with non-zero status …`, then `Process name: N` and `Exit code: X`
# (horovod/runner/gloo_run.py, Horovod 0.28.1).
TRACEBACK = "Traceback (most recent call last):"
HOROVOD_FAILED = re.compile(
    r"RuntimeError: Horovod detected that one or more processes exited with non-zero status"
)
PROCESS = re.compile(r"^\s*Process name:\s*(\S+)")
EXIT_CODE = re.compile(r"^\s*Exit code:\s*(-?\d+)")
# torchrun's own ending: `ChildFailedError` and its table, whose "Root Cause (first observed
# failure)" entry has `rank      : R (local_rank: L)` and `exitcode  : X (pid: P)`
# (torch/distributed/elastic/multiprocessing/errors/__init__.py, _MSG_FORMAT_TEMPLATE and
# _FAILURE_FORMAT_TEMPLATE, torch 2.13.0).
TORCHRUN_FAILED = re.compile(
    r"^torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError"
)
ROOT_CAUSE = "Root Cause (first observed failure):"
TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
TORCHRUN_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")


def teardown_abort(rank: str) -> str:
    """The line for a worker that aborted with libstdc++'s TEARDOWN_ABORT (training/teardown.py)."""
    return (
        f'error: worker rank {rank} aborted (SIGABRT, "{TEARDOWN_ABORT}"), as a torch.distributed '
        f"process does when its process group outlives the script into the interpreter's exit; "
        f"{CURE}\n"
    )


def summarize(lines: list[str], aborted: bool = False) -> tuple[str, int] | None:
    """(one line for the user, the worker's exit code) if `lines` are horovodrun's or
    torchrun's own traceback about a failed worker, else None. `aborted`: a worker printed
    TEARDOWN_ABORT."""
    if not lines or lines[0].rstrip("\n") != TRACEBACK:
        return None
    if any(TORCHRUN_FAILED.match(line) for line in lines):
        cause = lines[next(i for i, x in enumerate(lines) if x.startswith(ROOT_CAUSE)) :]
        rank = next((m[1] for line in cause if (m := TORCHRUN_RANK.match(line))), "?")
        code = next((int(m[1]) for line in cause if (m := TORCHRUN_EXIT.match(line))), 1)
        code = code if code > 0 else 128 - code  # a signal: as a shell reports it
        if aborted and code == 128 + signal.SIGABRT:
            return teardown_abort(rank), code
        line = f"error: worker rank {rank} failed first (exit code {code}); its messages are above"
        return line + "\n", code
    if not any(HOROVOD_FAILED.match(line) for line in lines):
        return None
    rank = next((m[1] for line in lines if (m := PROCESS.match(line))), "?")
    code = next((int(m[1]) for line in lines if (m := EXIT_CODE.match(line))), 1)
    return f"error: worker rank {rank} failed (exit code {code}); its messages are above\n", code


def relay(stream: TextIO, out: TextIO) -> int | None:
    """Copy `stream` to `out` line by line, holding back from the first traceback to the end;
    the launcher's own traceback is the last one (the last thing it prints): replaced by one
    line when it is about a failed worker, and the worker's exit code returned, else None.
    Everything before it (a worker's own traceback too) passes through unchanged."""
    held: list[str] = []
    aborted = False
    for line in stream:
        aborted = aborted or TEARDOWN_ABORT in line
        if held or line.rstrip("\n") == TRACEBACK:
            held.append(line)
            continue
        out.write(line)
        out.flush()
    last = max((i for i, line in enumerate(held) if line.rstrip("\n") == TRACEBACK), default=0)
    summary = summarize(held[last:], aborted)
    if summary is None:
        out.writelines(held)
        return None
    out.writelines(held[:last])
    out.write(summary[0])
    return summary[1]


def run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> int:
    """Run the launcher; stdout passes straight through, stderr through `relay`. The exit code
    is the failed worker's where horovodrun named it, else the launcher's (never 0 on failure)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stderr=subprocess.PIPE, text=True, bufsize=1)
    worker_code = relay(proc.stderr, sys.stderr)
    code = proc.wait()
    return worker_code if code != 0 and worker_code else code
