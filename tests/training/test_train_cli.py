"""`azdl train` as a user runs it: bad training options and data folders stopped before any
worker starts, a failed worker reported in one line instead of horovodrun's or torchrun's
traceback, the
training script's help printed once, and TensorFlow's C++ start-up lines kept out of the
set-up's Horovod build check unless AZDL_VERBOSE=1."""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from azdl import workers
from azdl.envs import PACKAGES_ROOT, SETUP_SCRIPT
from training.teardown import TEARDOWN_ABORT

OPERATOR_PYTHON = PACKAGES_ROOT / ".venv" / "bin" / "python"
# horovodrun's own ending when a worker fails (Horovod 0.28.1, horovod/runner/gloo_run.py,
# launch_gloo), as it printed here for `horovodrun --gloo -np 2` with rank 1 exiting 2.
HOROVODRUN_TRACEBACK = """\
Traceback (most recent call last):
  File "/venv/bin/horovodrun", line 8, in <module>
    sys.exit(run_commandline())
             ^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/horovod/runner/gloo_run.py", line 284, in launch_gloo
    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus \
causing the job to be terminated. The first process to do so was:
Process name: 1
Exit code: 2

"""


# torchrun's own ending when a worker fails (torch 2.13.0, torch/distributed/run.py and
# elastic/multiprocessing/errors/__init__.py), as it printed here on stderr for `python -m
# torch.distributed.run --standalone --nproc-per-node 2 --no-python python fails.py` with rank 1
# exiting 2 (paths shortened to /venv; \\x20: the trailing spaces it printed).
TORCHRUN_TRACEBACK = """\
E1126 16:38:38.416000 25970 /venv/lib/python3.11/site-packages/torch/distributed/elastic/\
multiprocessing/api.py:1002] failed (exitcode: 2) local_rank: 1 (pid: 26026) of binary: \
.venv-train/bin/python
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>
    main()
  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/\
__init__.py", line 367, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1028, in main
    run(args)
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1019, in run
    elastic_launch(
  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 194, in \
__call__
    return launch_agent(
           ^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in \
launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\x20
============================================================
.venv-train/bin/python FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_16:38:38
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 2 (pid: 26026)\x20
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def azdl(
    *args, cwd: Path = PACKAGES_ROOT, timeout: int = 300, **env
) -> subprocess.CompletedProcess:
    """The `azdl` command of this checkout, run from the operator environment."""
    return subprocess.run(
        azdl_argv(*args), cwd=cwd, env=operator_env(**env), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def azdl_argv(*args) -> list[str]:
    return [str(OPERATOR_PYTHON), "-m", "azdl", *map(str, args)]


def operator_env(**env) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return environ | {"PYTHONPATH": str(PACKAGES_ROOT), **env}


def shard_folder(path: Path, shards: int) -> Path:
    path.mkdir()
    for i in range(shards):  # only the names matter before a worker starts
        (path / f"train-{i:05d}-of-{shards:05d}").write_bytes(b"")
    return path


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--", "--batch-size", "0"],
         "azdl train --framework keras --: error: argument --batch-size: must be at least 1"),
        (["--framework", "torch", "--", "--precision", "fp8"],
         "azdl train --framework torch --: error: argument --precision: invalid choice: 'fp8'"),
        (["--", "--data-dir", "/nowhere"],
         "error: --data-dir: data directory '/nowhere' does not exist or is not a directory"),
        (["--", "--data-dir", "{empty}"], "error: --data-dir: no train shards in '{empty}'"),
        (["--workers", "2", "--", "--data-dir", "{one}"],
         "error: --data-dir: 2 workers but only 1 shard(s)"),
        (["--", "--checkpoint-every-steps", "5"],
         "error: --checkpoint-every-steps needs --checkpoint-dir"),
    ],
)  # fmt: skip
def test_bad_training_input_is_a_clean_error_before_any_worker_starts(tmp_path, argv, message):
    folders = {
        "empty": shard_folder(tmp_path / "empty", 0),
        "one": shard_folder(tmp_path / "one", 1),
    }
    argv = [a.format(**folders) for a in argv]
    run = azdl("train", *argv)
    assert run.returncode == 2, run.stderr
    assert message.format(**folders) in run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert "horovodrun" not in run.stderr  # the launch line: no worker was started
    assert len(run.stderr.splitlines()) <= 2  # at most a one-line usage, then the error


def test_the_training_scripts_help_is_printed_once():
    run = azdl("train", "--framework", "tf", "--", "--help")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("usage: ") == 1 and "--batch-size" in run.stdout


@pytest.mark.training_env
def test_a_users_scripts_help_is_printed_once(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text(
        "import argparse\nargparse.ArgumentParser(description='MINE-HELP').parse_args()\n"
    )
    run = azdl("train", "--script", script, "--workers", 2, "--", "--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("MINE-HELP") == 1
    assert not (tmp_path / "runs").exists()  # nothing created for a help


def relay(text: str) -> tuple[str, int | None]:
    import io

    out = io.StringIO()
    code = workers.relay(io.StringIO(text), out)
    return out.getvalue(), code


def test_horovodruns_traceback_after_a_failed_worker_becomes_one_line():
    worker = "[1]<stderr>:error: --batch-size must be at least 1\n"
    out, code = relay(worker + HOROVODRUN_TRACEBACK)
    assert code == 2
    assert out == worker + "error: worker rank 1 failed (exit code 2); its messages are above\n"


def test_torchruns_traceback_after_a_failed_worker_becomes_one_line():
    worker = "error: rank 1 cannot go on\n"
    out, code = relay(worker + TORCHRUN_TRACEBACK)
    assert code == 2
    kept, _, _ = TORCHRUN_TRACEBACK.partition("Traceback (most recent call last):")
    assert out == (
        worker + kept + "error: worker rank 1 failed first (exit code 2); its messages are above\n"
    )


def test_a_workers_own_traceback_before_torchruns_stays():
    """A worker's own traceback before torchrun's (labelled with its rank under azdl's
    torchrun, unlabelled where nothing labels it) stays; only torchrun's, the last one, is
    replaced."""
    own = "Traceback (most recent call last):\n  File \"train.py\", line 3\nKeyError: 'x'\n"
    out, code = relay(own + TORCHRUN_TRACEBACK)
    assert code == 2 and out.startswith(own) and "ChildFailedError" not in out
    signalled = TORCHRUN_TRACEBACK.replace("exitcode  : 2 (pid: 26026) ", "exitcode  : -9 (pid: 1)")
    assert relay(signalled)[1] == 137  # a signal, as a shell reports it


def test_a_worker_that_aborts_at_exit_is_named_as_such_in_one_line():
    """libstdc++'s line, then torchrun's table with the signal (training/teardown.py)."""
    aborted = f"rank 0: script returned\n{TEARDOWN_ABORT}\n"
    table = TORCHRUN_TRACEBACK.replace("exitcode  : 2 (pid: 26026) ", "exitcode  : -6 (pid: 1)")
    out, code = relay(aborted + table)
    assert code == 134 and out.startswith(aborted)
    assert out.splitlines()[-1].startswith('error: worker rank 1 aborted (SIGABRT, "terminate')
    assert relay(table)[0].splitlines()[-1].startswith("error: worker rank 1 failed first")


def test_any_other_traceback_passes_through_unchanged():
    other = "Traceback (most recent call last):\n  File 'x.py', line 1\nKeyError: 'rank'\n"
    before = "[0]<stdout>:step 1\n"
    assert relay(before + other) == (before + other, None)
    worker_traceback = "[1]<stderr>:Traceback (most recent call last):\n[1]<stderr>:  boom\n"
    assert relay(worker_traceback) == (worker_traceback, None)


@pytest.mark.slow
@pytest.mark.training_env
def test_a_worker_that_fails_is_reported_by_rank_without_horovodruns_traceback(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(
        "import os, sys\n"
        "if os.environ['HOROVOD_RANK'] == '1':\n"
        "    print('error: rank 1 cannot go on', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    run = azdl("train", "--script", script, "--workers", 2, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "[1]<stderr>:error: rank 1 cannot go on" in run.stderr
    # One line for the failure, then the run's ledger, whose last line names its events' folder.
    failure = "error: worker rank 1 failed (exit code 2); its messages are above\n"
    assert run.stderr.count(failure) == 1, run.stderr
    after = run.stderr.split(failure)[1].splitlines()
    assert after[-1].startswith("events and attempts: ")
    assert "Traceback" not in run.stderr and "RuntimeError" not in run.stderr


# A script of a user's that steps for about 8 s and reports its steps (docs/jobs.md, "The events
# behind it"): time for a step batch (training.events.STEP_LINE_S) while `azdl jobs watch` polls.
STEPPING = """\
import time
from training import events
events.started()
for step in range(1, 41):
    time.sleep(0.2)
    events.step(step, 8)
events.end(40)
"""


@pytest.mark.slow
@pytest.mark.training_env
def test_watch_follows_a_local_run_to_its_end_and_prints_the_ledger_train_printed(tmp_path):
    script, run_dir = tmp_path / "steps.py", tmp_path / "run"
    script.write_text(STEPPING)
    train = subprocess.Popen(
        azdl_argv("train", "--script", script, "--workers", 1, "--run-dir", run_dir),
        cwd=tmp_path, env=operator_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    events_dir, deadline = run_dir / "events", time.monotonic() + 60
    while not list(events_dir.glob("attempt-*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    watch = azdl("jobs", "watch", "--events-dir", events_dir, "--every", 1, "--steps", 40,
                 cwd=tmp_path, timeout=120)  # fmt: skip
    _, err = train.communicate(timeout=120)
    assert train.returncode == 0, err
    assert f"azdl: follow it with `azdl jobs watch --events-dir {events_dir}`" in err
    assert watch.returncode == 0, watch.stderr
    polls, ledger = watch.stdout.split("\nledger of ", 1)
    polls = polls.splitlines()
    running = [p for p in polls if " Running (attempt 1); " in p]
    assert len(running) >= 3, polls  # polled while it ran, once a second
    paced = [p for p in running if "; images/s -; " not in p]
    assert paced and all(re.search(r"; ETA \d+:\d\d:\d\d; cost USD -; ", p) for p in paced), polls
    assert "; estimate - (no estimate on this job: a local run); " in polls[0]
    assert re.search(r"^job local-\S+ Completed \(attempt 1\); step 40; ", polls[-1]), polls
    assert "; ETA - (ended); " in polls[-1] and len(polls) == len(running) + 1
    # The ledger watch ends with is the one azdl train printed at its end.
    assert f"ledger of {ledger}".strip() in err, (ledger, err)


@pytest.mark.slow
@pytest.mark.training_env
@pytest.mark.parametrize("verbose", [False, True])
def test_the_horovod_build_check_shows_tensorflows_start_up_lines_only_when_verbose(verbose):
    check = SETUP_SCRIPT.parent / "horovod-check-build.sh"
    assert (
        f'bash {check.relative_to(PACKAGES_ROOT)} "$venv"' in SETUP_SCRIPT.read_text()
    )  # the set-up runs this very script
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "AZDL_VERBOSE")}
    if verbose:
        env["AZDL_VERBOSE"] = "1"
    run = subprocess.run(
        ["bash", str(check), str(PACKAGES_ROOT / ".venv-train")],
        cwd=PACKAGES_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "[X] TensorFlow" in run.stdout
    # TensorFlow 2.15 on x86-64 Linux logs at INFO that its oneDNN custom operations are on.
    assert ("I tensorflow/" in run.stderr) is verbose, run.stderr
