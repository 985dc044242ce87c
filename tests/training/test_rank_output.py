"""Each torchrun worker's output whole and labelled with its global rank, as horovodrun labels it
(`[1]<stdout>:`; the format as horovodrun printed it: tests/training/test_recipe_cli.py):
training.rank_output on its own, two of them writing into one pipe, and a real 2-worker torchrun
run through `azdl train` (issue 35, Build 6)."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from azdl.envs import PACKAGES_ROOT, training_env
from training import rank_output

LABELLER = [sys.executable, "-m", "training.rank_output", "--"]
# Unbuffered, as both images run Python (PYTHONUNBUFFERED=1): print() writes its words, the
# spaces and the newline separately, the case in which torchrun's own --tee labels cut lines.
CHATTY = """\
import os, sys
rank = os.environ["RANK"]
for i in range({lines}):
    print("rank", rank, "line", i, "sum 3 grad 3")
    print("rank", rank, "error", i, file=sys.stderr)
"""


def labelled(rank: str, command: list[str], **kwargs) -> subprocess.Popen:
    env = training_env({"RANK": rank, "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen([*LABELLER, *command], env=env, cwd=PACKAGES_ROOT, **kwargs)


def test_each_line_comes_whole_after_its_rank_and_stream():
    code = 'import sys; print("a b", 1); sys.stdout.write("no end"); sys.stderr.write("x\\ry\\n")'
    proc = labelled("3", [sys.executable, "-c", code], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)  # fmt: skip
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out == b"[3]<stdout>:a b 1\n[3]<stdout>:no end\n"  # a last line gets its end
    assert err == b"[3]<stderr>:x\r[3]<stderr>:y\n"  # \r ends a line, as Horovod splits them


@pytest.mark.parametrize(
    ("code", "returncode"),
    [
        ("raise SystemExit(7)", 7),
        ("import os; os.abort()", -signal.SIGABRT),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ],
)
def test_the_worker_ends_as_its_command_did(code, returncode):
    """torchrun reports the worker's exit code, or the signal that ended it, as its own."""
    proc = labelled("0", [sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.wait(timeout=30) == returncode


def test_a_stop_signal_to_the_group_ends_the_command_whose_last_lines_still_come():
    """torchrun stops a worker with os.killpg: the command, in the same group, gets the signal
    and ends as it chooses; its last words still come through."""
    code = textwrap.dedent("""\
        import signal, sys, time
        def stop(*_):
            print("stopping cleanly", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = labelled("1", [sys.executable, "-c", code], stdout=subprocess.PIPE,
                    start_new_session=True)  # fmt: skip
    assert proc.stdout.readline() == b"[1]<stdout>:ready\n"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.stdout.read() == b"[1]<stdout>:stopping cleanly\n"
    assert proc.wait(timeout=30) == 3


def test_two_ranks_writing_at_once_into_one_pipe_keep_their_lines_whole():
    lines = 3000
    read, write = os.pipe()
    chatty = [sys.executable, "-c", CHATTY.format(lines=lines)]
    procs = [labelled(rank, chatty, stdout=write, stderr=write) for rank in ("0", "1")]
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read().decode()
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    whole = re.compile(
        r"\[(\d)\]<stdout>:rank \1 line \d+ sum 3 grad 3|\[(\d)\]<stderr>:rank \2 error \d+"
    )
    assert [line for line in output.splitlines() if not whole.fullmatch(line)] == []
    assert len(output.splitlines()) == 2 * 2 * lines


# Each write is a burst of whole lines far over PIPE_BUF, as a worker's buffered block (8 KiB)
# or a flushed progress dump arrives: the labeller must not pass it on in one write.
BURSTY = """\
import os, sys
rank = os.environ["RANK"]
for burst in range({bursts}):
    sys.stdout.buffer.write(b"".join(
        b"rank %s burst %d line %d sum 3 grad 3\\n" % (rank.encode(), burst, i) for i in range(2000)
    ))
    sys.stdout.flush()
"""


def test_bursts_of_many_lines_from_two_ranks_into_a_slow_pipe_keep_their_lines_whole():
    """A write over PIPE_BUF to a full pipe may be split around another rank's write (POSIX
    write(2)); a slow reader keeps the node's pipe full, as a busy log collector does."""
    bursts = 8
    read, write = os.pipe()
    bursty = [sys.executable, "-c", BURSTY.format(bursts=bursts)]
    procs = [labelled(rank, bursty, stdout=write) for rank in ("0", "1")]
    os.close(write)
    chunks = []
    with os.fdopen(read, "rb", buffering=0) as pipe:
        while chunk := pipe.read(1000):
            chunks.append(chunk)
            time.sleep(0.0002)
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    lines = b"".join(chunks).decode().splitlines()
    whole = re.compile(r"\[(\d)\]<stdout>:rank \1 burst \d line \d+ sum 3 grad 3")
    assert [line for line in lines if not whole.fullmatch(line)][:3] == []
    assert len(lines) == 2 * bursts * 2000


def test_writes_hold_whole_lines_of_at_most_pipe_buf_bytes():
    lines = [b"x" * 1000 + b"\n"] * 9 + [b"y" * 5000 + b"\n", b"z\n"]
    writes = rank_output.atomic_writes(lines)
    assert b"".join(writes) == b"".join(lines)
    assert [len(w) for w in writes] == [4004, 4004, 1001, 5001, 2]  # the long line alone


DDP_CHATTY = """\
import os, sys
import torch.distributed as dist
dist.init_process_group("gloo")  # env://, from torchrun: azdl starts it under torchrun
dist.barrier()  # both ranks print at once
rank = dist.get_rank()
for i in range(2000):
    print("rank", rank, "of", dist.get_world_size(), "line", i, "sum 3 grad 3")
print("rank", rank, "done", file=sys.stderr)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_a_two_worker_torchrun_run_labels_every_workers_line_whole(tmp_path):
    """`azdl train --script` of a torch.distributed script, 2 workers under torchrun: every
    line either worker prints comes back whole, labelled with its global rank."""
    (tmp_path / "chatty.py").write_text(DDP_CHATTY)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    run = subprocess.run(
        [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", "train", "--script",
         "chatty.py", "--workers", "2", "--run-dir", str(tmp_path / "run")],
        cwd=tmp_path, env=env | {"PYTHONPATH": str(PACKAGES_ROOT), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout
    workers = [line for line in run.stdout.splitlines() if "rank " in line]
    whole = re.compile(
        r"\[(\d)\]<stdout>:rank \1 of 2 line \d+ sum 3 grad 3|\[(\d)\]<stderr>:rank \2 done"
    )
    assert [line for line in workers if not whole.fullmatch(line)] == [], run.stdout[-3000:]
    assert len(workers) == 2 * 2001


def test_a_process_the_command_leaves_behind_does_not_keep_the_worker_from_ending():
    """It holds the worker's stdout open; without the labeller torchrun would not wait for it."""
    code = (
        "import subprocess, sys; print('started', flush=True); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])"
    )
    started = time.monotonic()
    proc = labelled("0", [sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"[0]<stdout>:started\n"
    assert proc.wait(timeout=20) == 0
    assert time.monotonic() - started < 15
