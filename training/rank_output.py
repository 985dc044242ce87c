"""Each line a torchrun worker writes, whole and labelled with its global rank, as horovodrun
labels them (`[1]<stdout>:`):

    python -m training.rank_output -- COMMAND [ARGS...]

runs COMMAND (under torchrun, which sets RANK) and copies its stdout and stderr to its own, each
line (ended by \\n or \\r, as Horovod splits them) written in one piece after its label. One write
of up to PIPE_BUF bytes (4096 on Linux) to a pipe is never interleaved with another process's,
and a longer one may be (POSIX write(2)): so lines go out in writes of whole lines of at most
PIPE_BUF bytes, and the ranks' lines stay apart in the node's output. (A single line longer
than PIPE_BUF cannot be kept whole by any writer; it goes in one write.)

Why not torchrun's own labels (`--tee 3` with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:",
torch 2.13.0: torch/distributed/run.py reads the variable, elastic/multiprocessing/tail_log.py
labels what it reads back from each worker's log file): its tailer reads a file with `readline`,
which at the file's end returns the part of a line written so far, and labels that part as a
line. Unbuffered Python (PYTHONUNBUFFERED=1, as both images run it) writes print()'s text and
its newline in separate writes, so lines come out cut and merged with another rank's: 2 of 6,000
lines in two of three runs here ("[1]:rank 1 l[0]:rank 0 line 1112 …"). Horovod's labeller reads
each worker's pipe and writes whole lines only (horovod/runner/common/util/safe_shell_exec.py,
prefix_connection, 0.28.1); so does this, and COMMAND runs unbuffered (PYTHONUNBUFFERED=1 unless
set) so that its lines come as it writes them.

torchrun stops a worker by signalling its process group (os.killpg: elastic/multiprocessing/
subprocess_handler/subprocess_handler.py), which holds COMMAND too; so SIGTERM, SIGINT and SIGHUP
do not end this process: it copies COMMAND's last lines, then ends as COMMAND did, with its exit
code or by the same signal, which torchrun reports as the worker's."""

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import threading

STREAMS = {1: "stdout", 2: "stderr"}
# A label as a regular expression, for readers of a node's log (azdl.jobs.retry): a line of the
# guard's, or of the script's, starts with one under torchrun.
LABEL = r"\[\d+\]<(?:stdout|stderr)>:"
LINE = re.compile(rb"[^\n\r]*[\n\r]")
# The signals torchrun (and a terminal) send the worker's process group, COMMAND included.
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# After COMMAND has ended, how long its output may still take to arrive: a process it started
# that outlives it (and holds its stdout) must not keep the worker from ending, as it would not
# without this labeller.
DRAIN_S = 5


def complete_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The lines `buffer` completes (each with its \\n or \\r), and the rest."""
    lines = LINE.findall(buffer)
    return lines, buffer[sum(map(len, lines)) :]


def write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def atomic_writes(lines: list[bytes]) -> list[bytes]:
    """`lines` joined into as few writes as keep each at most PIPE_BUF bytes, whole lines only."""
    writes: list[bytes] = []
    for line in lines:
        if writes and len(writes[-1]) + len(line) <= select.PIPE_BUF:
            writes[-1] += line
        else:
            writes.append(line)
    return writes


def copy(source: int, target: int, label: bytes) -> None:
    """Copy `source` to `target` until its end, a label before each line; a last line without
    an end gets one. If `target` goes (its reader ended), the rest is read and dropped, so that
    COMMAND never blocks on a full pipe."""
    rest, open_target = b"", True
    while chunk := os.read(source, 65536):
        lines, rest = complete_lines(rest + chunk)
        if open_target and lines:
            try:
                for data in atomic_writes([label + line for line in lines]):
                    write_all(target, data)
            except BrokenPipeError:
                open_target = False
    if rest and open_target:
        write_all(target, label + rest + b"\n")


def run(command: list[str], rank: str) -> int:
    """COMMAND's exit code (negative: the signal that ended it), its output labelled."""
    for stop in STOPS:  # a caught signal is reset to its default in COMMAND at exec
        signal.signal(stop, lambda *_: None)
    env = os.environ | {"PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED") or "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    copies = [
        threading.Thread(
            target=copy, args=(pipe.fileno(), fd, f"[{rank}]<{name}>:".encode()), daemon=True
        )
        for pipe, (fd, name) in zip((proc.stdout, proc.stderr), STREAMS.items(), strict=True)
    ]
    for thread in copies:
        thread.start()
    code = proc.wait()
    for thread in copies:
        thread.join(timeout=DRAIN_S)
    return code


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.rank_output", description=__doc__)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    command = p.parse_args(argv).command
    command = command[1:] if command[:1] == ["--"] else command
    if not command:
        p.error("no command given after --")
    rank = os.environ.get("RANK")
    if rank is None:
        p.error("RANK is not set: this runs a worker's command under torchrun, which sets it")
    code = run(command, rank)
    if code < 0:  # end by the same signal, as torchrun then reports it for the worker
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # neither can be caught nor reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
