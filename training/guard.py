"""Runs one rank's training command and watches it (stdlib only): records the rank's host, names
the ranks Horovod's stall inspector reports missing, with `--check-infiniband` stops the rank when
NCCL fell back to TCP or runs without GPUDirect RDMA across nodes, and ends a hang: NCCL's init
past `--init-deadline`, or no training step for `--progress-timeout` (the heartbeat of
training.heartbeat), dumps the Python stacks of the command's processes and stops it.

    python -m training.guard --ranks-dir DIR [--check-infiniband --nodes N] -- python train.py ...

Exit code: the command's (128 + signal number for a signal), 3 when the InfiniBand check stopped
it, 4 when it hung (both retryable: azdl.jobs.retry). Design: docs/architecture.md ("The guard").
"""

import argparse
import contextlib
import dataclasses
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from training import exits, flight_recorder, heartbeat, job_stop
from training.nccl_check import NcclCheck
from training.ranks import host_of, record_host, save_exit

IB_CHECK_FAILED = 3
HUNG = 4
# How the guard's own lines start, and the words after that when it stops the command: what
# azdl.jobs.retry reads in a failed job's logs to retry it.
PREFIX = "azdl:"
IB_STOP_LINE = "InfiniBand check FAILED on"
HANG_LINE = "hang:"
# Open MPI, Intel MPI / MPICH, horovodrun; RANK: torchrun's (torch/distributed/run.py,
# "Environment Variables").
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK", "RANK")
_MISSING_RANK = re.compile(r"^\s*(\d+)(!?): \[(.*)\]\s*$")
_STALL_SHUTDOWN = "is stalled for longer than"
_INIT_START = re.compile(r"NCCL INFO .*- Init START")
_INIT_COMPLETE = re.compile(r"NCCL INFO .*- Init COMPLETE")
# How long the command's processes get to write their stacks before they are killed.
DUMP_GRACE_S = 15
# Each nvidia-smi query of the post-mortem after a failure (a lost GPU can make it hang).
POST_MORTEM_TIMEOUT_S = 20
TICK_S = 1.0


def this_rank() -> int | None:
    for name in RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def say(message: str) -> None:
    print(f"{PREFIX} {message}", file=sys.stderr, flush=True)


class Watch:
    """What the guard reads in the command's output (`line`, once per line) and checks on the
    clock (`tick`, about once a second); `stop` is set when the guard has to end the command."""

    def __init__(self, args, rank: int | None, host: str, beat_file: Path | None = None,
                 clock=time.monotonic):  # fmt: skip
        self.args, self.rank, self.host, self.clock = args, rank, host, clock
        self.check = (
            NcclCheck(multi_node=args.nodes > 1, expected_hcas=args.hcas)
            if args.check_infiniband
            else None
        )
        self.beat_file = beat_file
        self.started = clock()
        self.stalled: dict[int, str] = {}  # rank → tensors it has not submitted
        self.shutdown = False
        self.failed_check = None
        self.hang: str | None = None  # why the guard ended the command as hung
        self.init_started: float | None = None  # an NCCL communicator's Init START, not complete
        self.inits_complete = 0
        self.complete_at: float | None = None
        self.signs = exits.Signs()  # the first sign of why the command ended (training.exits)
        self.hang_for: float | None = None  # seconds the command had been stuck when found hung
        self.stuck_since: float | None = None  # when it stopped moving (wall time): the failure
        self.check_failed_at: float | None = None  # when the InfiniBand check stopped it
        self.stopped_at: float | None = None  # when its launcher signalled the guard (wall time)
        self.lock = threading.Lock()

    @property
    def stop(self) -> int | None:
        """The guard's exit code once it must end the command, else None."""
        if self.hang is not None:
            return HUNG
        return IB_CHECK_FAILED if self.failed_check is not None else None

    def where(self) -> str:
        return f"rank {self.rank} on {self.host}"

    def line(self, text: str, stream: str = "stderr") -> bool:
        """Looks at one line of `stream`; returns whether it goes on to the output."""
        with self.lock:
            self.signs.feed(text, time.time(), stream)
            if match := _MISSING_RANK.match(text):
                self.stalled[int(match.group(1))] = match.group(3)
                if match.group(2):
                    self.shutdown = True
                host = host_of(self.args.ranks_dir, int(match.group(1)))
                say(f"stall: rank {match.group(1)} on {host} has not submitted {match.group(3)}")
            elif _STALL_SHUTDOWN in text:
                self.shutdown = True
            if "NCCL" not in text:
                return True
            first_complete = False
            if _INIT_START.search(text) and self.init_started is None:
                self.init_started = self.clock()
            elif _INIT_COMPLETE.search(text):
                self.init_started = None
                first_complete = not self.inits_complete
                self.inits_complete += 1
                self.complete_at = self.complete_at or self.clock()
            if self.check is not None and self.check.verdict is None:
                verdict = self.check.feed(text)
                if verdict is not None:
                    self.report(verdict)
                return True
            # NCCL_DEBUG=INFO was set for the guard: once it has what it needs (the check's
            # verdict, else the first communicator's set-up), INFO goes back to the user's level.
            if self.args.nccl_debug in (None, "INFO", "TRACE") or "NCCL INFO" not in text:
                return True
            return first_complete or (self.check is None and not self.inits_complete)

    def tick(self) -> None:
        """The deadlines: the wait for a channel across nodes, NCCL's init, training steps."""
        with self.lock:
            now = self.clock()
            check, deadline = self.check, self.args.connect_deadline
            waiting = check is not None and check.waiting_for_channel
            if waiting and self.complete_at is not None and now - self.complete_at >= deadline:
                self.report(check.at_deadline(deadline))
            if self.hang is not None:
                return
            limit = self.args.init_deadline
            if limit and self.init_started is not None and now - self.init_started >= limit:
                self.hang = (
                    f"NCCL's communicator set-up (Init START) has not completed after {limit:g} s"
                )
                self.hang_for = now - self.init_started
            elif self.args.progress_timeout and self.beat_file is not None:
                self.hang = self.progress_problem(now)
                self.hang_for = self.stalled_for()
            if self.hang is not None:
                self.stuck_since = time.time() - (self.hang_for or 0.0)
                say(f"{HANG_LINE} {self.where()}: {self.hang}; dumping the Python stacks of its "
                    "processes, then stopping it (exit code 4, retryable)")  # fmt: skip

    def progress_problem(self, now: float) -> str | None:
        """Why the run counts as hung by its heartbeat, or None."""
        beat = heartbeat.read(self.beat_file)
        if beat is None:
            first = self.args.first_step_timeout
            if now - self.started >= first:
                return f"no training step within {first:g} s of the start"
            return None
        step, age = beat
        if age >= self.args.progress_timeout:
            return f"no training step for {age:.0f} s (the last one recorded was step {step})"
        return None

    def stalled_for(self) -> float | None:
        """Seconds since the last heartbeat (since the start if none yet), or None: no watchdog."""
        if not self.args.progress_timeout or self.beat_file is None:
            return None
        beat = heartbeat.read(self.beat_file)
        return (self.clock() - self.started) if beat is None else beat[1]

    def report(self, verdict) -> None:
        if verdict.ok:
            say(f"InfiniBand check passed on {self.where()}: {verdict.message}")
        elif self.args.nodes > 1:
            say(f"{IB_STOP_LINE} {self.where()}: {verdict.message}; stopping the job")
            self.failed_check = verdict
            self.check_failed_at = time.time()
        else:
            say(f"warning: InfiniBand check on {self.where()}: {verdict.message} "
                "(single node: goes on)")  # fmt: skip

    def summary(self) -> None:
        if self.stalled:
            ranks = ", ".join(
                f"{r} ({host_of(self.args.ranks_dir, r)})" for r in sorted(self.stalled)
            )
            what = "Horovod shut the job down" if self.shutdown else "the job ended"
            say(f"{what} on a stall: rank(s) {ranks} stopped calling collectives")
        if self.check is not None and self.check.verdict is None:
            verdict = self.check.finish()
            say(f"InfiniBand not verified on rank {self.rank}: the command ended first "
                f"({verdict.message})")  # fmt: skip


def exit_record(watch: Watch, returncode: int, code: int, error_file: dict | None,
                now: float) -> exits.Record:  # fmt: skip
    """What ended the command (training.exits), from the guard's own stops, the signs in its
    output, torchrun's error file of the rank and how it exited."""
    sig = exits.signal_name(-returncode) if returncode < 0 else None
    first = watch.signs.first
    if first is None and error_file is not None:
        first = (exits.kind_of(error_file["line"]) or exits.USER, error_file["line"],
                 error_file["time"])  # fmt: skip
    stopped = watch.stopped_at
    if code == 0:
        kind, line, at = exits.FINISHED, "", now
    elif watch.stop == IB_CHECK_FAILED:
        kind, line, at = exits.INFINIBAND_STOP, watch.failed_check.message, watch.check_failed_at
    elif watch.stop == HUNG:  # the failure is when it stopped moving, not when it was ended
        kind, line, at = exits.HANG, watch.hang, watch.stuck_since
    elif first is not None and (stopped is None or first[2] <= stopped):
        kind, line, at = first
    elif stopped is not None:
        kind, line, at = exits.STOPPED, "stopped by its launcher's signal", stopped
    elif sig is not None:
        kind, line, at = exits.KILLED, f"ended by {sig}", now
    else:
        kind, line, at = exits.USER, f"exited with code {code}: {watch.signs.last}", now
    return exits.Record(
        rank=watch.rank, node=watch.host, round=restart_round(), time=round(at, 3), exit=code,
        signal=sig, kind=kind, line=line,
    )  # fmt: skip


def restart_round() -> int:
    """torchrun's restart round of this worker (torch/distributed/run.py, "Environment
    Variables": TORCHELASTIC_RESTART_COUNT); 0 under MPI."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)


# torchrun gives each worker a file for its error (torch 2.13,
# torch/distributed/elastic/multiprocessing/api.py: TORCHELASTIC_ERROR_FILE, `<log_dir>/<run id>/
# attempt_<n>/<local rank>/error.json`); a worker under `errors.record` writes its exception
# there (errors/error_handler.py `record_exception`: {"message": {"message": "Type: text",
# "extraInfo": {"py_callstack": traceback, "timestamp": "<int seconds>"}}}), and the agent
# prints the earliest one as its "Root Cause (first observed failure)" (errors/__init__.py,
# `ProcessFailure`, which also takes {"message": "text", "timestamp": N}).
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"


def read_error_file() -> dict | None:
    """The exception the command wrote to torchrun's error file: {"line", "time"}, or None."""
    path = os.environ.get(ERROR_FILE_ENV)
    if not path or not Path(path).is_file():
        return None
    data = json.loads(Path(path).read_text())
    message = data["message"]
    if isinstance(message, dict):
        text, stamp = message["message"], message["extraInfo"]["timestamp"]
    else:
        text, stamp = message, data.get("timestamp", 0)
    return {"line": text.strip().splitlines()[0][: exits.MAX_LINE], "time": float(stamp)}


def write_error_file(record: exits.Record) -> None:
    """The rank's failure in torchrun's error file, when the command wrote none: torchrun's
    "Root Cause" then shows it, with its time, instead of a hint to decorate the script."""
    path = os.environ.get(ERROR_FILE_ENV)
    if not path or Path(path).exists():
        return
    message = {"message": record.line, "extraInfo": {
        "py_callstack": record.line, "timestamp": str(int(record.time))}}  # fmt: skip
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"message": message}))


def save_record(ranks_dir: Path, record: exits.Record) -> None:
    """The record printed (the job's logs) and written beside the rank's host record."""
    print(record.text(), file=sys.stderr, flush=True)
    if record.rank is not None:
        save_exit(ranks_dir, record)


def per_round_dumps(env: dict[str, str]) -> None:
    """Under torchrun, the flight recorder's dumps go to this restart round's own folder
    (training.flight_recorder.round_prefix): every round's rank R would write the same file."""
    prefix = env.get(flight_recorder.DUMP_PREFIX_ENV)
    if not prefix or "TORCHELASTIC_RESTART_COUNT" not in env:
        return
    env[flight_recorder.DUMP_PREFIX_ENV] = flight_recorder.round_prefix(prefix, restart_round())
    # PyTorch's dump writer makes no folders.
    Path(env[flight_recorder.DUMP_PREFIX_ENV]).parent.mkdir(parents=True, exist_ok=True)


def post_mortem(gpus: int) -> list[str]:
    """After a failure: the health gate's nvidia-smi checks of this node (GPU count, ECC, row
    remaps; training.health), each under POST_MORTEM_TIMEOUT_S. What is wrong (empty: nothing):
    a GPU lost since the start, a pending row remap, or nvidia-smi itself failing."""
    from training.health import gate, nvidia_smi

    found = []
    for command, parse, problems in (
        (nvidia_smi.COMMAND, nvidia_smi.parse, lambda g: nvidia_smi.problems(g, gpus)),
        (nvidia_smi.REMAP_COMMAND, nvidia_smi.parse_remaps, nvidia_smi.remap_problems),
    ):
        code, text = gate.run_command(list(command), None, POST_MORTEM_TIMEOUT_S)
        if code != 0:
            last = text.strip().splitlines()[-1:] or ["no output"]
            return [*found, f"nvidia-smi failed (exit {code}): {last[0]}"]
        try:
            found += problems(parse(text))
        except ValueError as exc:  # a line that is not a GPU's ("Unable to determine ...")
            return [*found, str(exc)]
    return found


def stop_the_job(why: str) -> None:
    """Under a job's torchrun: no node restarts its workers (training.job_stop)."""
    if folder := os.environ.get(job_stop.STOP_DIR_ENV):
        job_stop.write(Path(folder), IB_CHECK_FAILED, why)
    job_stop.close_rendezvous(why)


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (Linux /proc), parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        found.append(current)
        queue += children.get(current, [])
    return found


def dump_and_kill(child: subprocess.Popen) -> None:
    """Every process of the command writes its Python stacks and ends: SIGABRT, which
    faulthandler (PYTHONFAULTHANDLER, set for the command) turns into a dump of every thread's
    stack on stderr, with core files off for them; whatever is left after DUMP_GRACE_S is killed."""
    tree = descendants(child.pid)
    for pid in tree:
        try:
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            os.kill(pid, signal.SIGABRT)
        except ProcessLookupError:
            continue
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=DUMP_GRACE_S)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def relay(stream, out, watch: Watch) -> None:
    name = "stdout" if out is sys.stdout else "stderr"
    for text in iter(stream.readline, ""):
        if watch.line(text.rstrip("\n"), name):
            out.write(text)
            out.flush()


def watchdog(watch: Watch, child: subprocess.Popen, done: threading.Event) -> None:
    """Checks the deadlines every TICK_S and ends the command when the guard must."""
    while not done.wait(TICK_S):
        watch.tick()
        if watch.stop == IB_CHECK_FAILED:  # every restart would stop the same way: first
            # the job is told, so that no node restarts when this rank ends
            stop_the_job(f"{IB_STOP_LINE} {watch.where()}: {watch.failed_check.message}")
            child.terminate()
            return
        if watch.stop == HUNG:
            dump_and_kill(child)
            return


def positive_seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds above 0")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m training.guard", description=__doc__)
    p.add_argument("--ranks-dir", type=Path, required=True, help="folder of rank → host records")
    p.add_argument("--check-infiniband", action="store_true", help="verify NCCL's transport")
    p.add_argument("--nodes", type=int, default=1, help="nodes in the job (GDR needed if > 1)")
    p.add_argument("--hcas", type=int, help="InfiniBand HCAs the VM size has (checked if given)")
    p.add_argument(
        "--nccl-debug",
        help="the user's NCCL_DEBUG, when the job set INFO for the "
        "guard: later INFO lines are dropped unless it is INFO or TRACE",
    )
    p.add_argument(
        "--connect-deadline", type=positive_seconds, default=120.0, metavar="S",
        help="after Init COMPLETE, wait this long for the rank's first channel across nodes "
        "(NCCL >= 2.22 connects at the first collective; default 120)",
    )  # fmt: skip
    p.add_argument(
        "--init-deadline",
        type=positive_seconds,
        metavar="S",
        help="end the command when an NCCL communicator's set-up takes longer",
    )
    p.add_argument("--progress-timeout", type=positive_seconds, metavar="S",
                   help="end the command when it makes no training step for this long "
                   "(training.heartbeat)")  # fmt: skip
    p.add_argument("--first-step-timeout", type=positive_seconds, default=1800.0, metavar="S",
                   help="with --progress-timeout: the allowance for the first step (default "
                   "1800)")  # fmt: skip
    p.add_argument("--post-mortem-gpus", type=int, metavar="N",
                   help="after a failure, check this node's N GPUs with nvidia-smi (the health "
                   "gate's checks) and put what is wrong into the exit record")  # fmt: skip
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the rank's command")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("no command: give it after --")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    rank, host = this_rank(), socket.gethostname()
    if rank is not None:
        record_host(args.ranks_dir, rank, host)
        say(f"rank {rank} on {host} (pid {os.getpid()})")
    beat_file = None
    if args.progress_timeout:
        beat_file = Path(tempfile.mkdtemp(prefix="azdl-guard-")) / "heartbeat"
    # A value already set wins, except the heartbeat's path, which is this guard's.
    env = {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"} | dict(os.environ)
    if beat_file is not None:
        env[heartbeat.ENV] = str(beat_file)
    per_round_dumps(env)
    child = subprocess.Popen(
        args.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        errors="replace", env=env,
    )  # fmt: skip
    watch = Watch(args, rank, host, beat_file)

    def on_signal(signum, _frame):
        """mpirun ends a job by signalling its processes: the signal goes on to the command,
        after a stack dump when the command had stopped making steps (a hang another rank's
        guard found first)."""
        watch.stopped_at = watch.stopped_at or time.time()
        stalled = watch.stalled_for()
        if stalled is not None and stalled >= min(60.0, args.progress_timeout / 2):
            say(f"{watch.where()} stopped by signal {signum} after {stalled:.0f} s without a "
                "training step: dumping its stacks")  # fmt: skip
            threading.Thread(target=dump_and_kill, args=(child,), daemon=True).start()
        else:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    done = threading.Event()
    threads = [
        threading.Thread(target=relay, args=(child.stdout, sys.stdout, watch)),
        threading.Thread(target=relay, args=(child.stderr, sys.stderr, watch)),
        threading.Thread(target=watchdog, args=(watch, child, done), daemon=True),
    ]
    for thread in threads:
        thread.start()
    code = child.wait()
    done.set()
    for thread in threads[:2]:
        thread.join()
    watch.summary()
    exit_code = watch.stop if watch.stop is not None else (code if code >= 0 else 128 - code)
    record = exit_record(watch, code, exit_code, read_error_file(), time.time())
    if args.post_mortem_gpus and exit_code != 0 and record.kind != exits.STOPPED:
        record = dataclasses.replace(record, post_mortem=post_mortem(args.post_mortem_gpus))
    if exit_code != 0:
        write_error_file(record)
    save_record(args.ranks_dir, record)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
