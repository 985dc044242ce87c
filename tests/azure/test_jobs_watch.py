"""`azdl jobs watch` on a retry that runs to its end (tests/azure/ledger_workspace.py): the
workspace answers as it stands at the fake clock's time, which moves only when the watch sleeps;
stdout is not a terminal, so each poll is one plain line. The jobs there carry no estimate's tags
(as an older azdl submitted them); with the tags `azdl submit` sets, the measured pace is set
against `azdl estimate`'s figure."""

import re
from datetime import timedelta

import pytest

from azdl.cli import main
from azdl.estimate.job_tags import BASIS_TAG, IMAGES_TAG
from azdl.jobs import watch_job
from azdl.jobs.script_job import SCRIPT_TAG
from tests.azure.fake_clock import Clock
from tests.azure.ledger_workspace import T0, serve

START_S = 250  # the first poll: r1-retry1 has made its first step
WATCH = ["jobs", "watch", "r1-retry1", "--every", "60", "--steps", "100"]
OLDER = (
    "estimate - (no estimate on this job: no azdl.estimate_images_per_s tag: submitted by an "
    "azdl older than it, or a model, size and node count `azdl estimate` has no figure for)"
)


@pytest.fixture
def clock(ml_client, outputs_storage, monkeypatch):
    clock = Clock()
    clock.now, clock.storage = START_S, outputs_storage
    serve(ml_client.return_value, outputs_storage, lambda: clock.now)
    monkeypatch.setattr(watch_job, "SLEEP", clock.sleep)
    monkeypatch.setattr(watch_job, "NOW", lambda: T0 + timedelta(seconds=clock.now))
    return clock


def test_watch_follows_the_retry_to_its_end(clock, outputs_file, capsys):
    assert main([*WATCH, "--outputs", str(outputs_file())]) == 0
    polls, ledger = capsys.readouterr().out.split("\nledger of ", 1)
    polls = polls.splitlines()
    assert clock.sleeps == [60, 60] and len(polls) == 3  # at 250, 310 and 370 s
    assert polls[0].startswith(
        f"job r1-retry1 Running (attempt 2); step 11; images/s -; {OLDER}; ETA - (no step batch "
        "yet)"
    )
    # At 310 s: the batch of steps 21-30 took 30 s (640 samples); 70 steps left at 1/3 step/s.
    # Cost: the ledger's billed node-time so far, r1's 100 s and r1-retry1's 80 s on 2 nodes at
    # 98.32 USD/h; projected: 210 s more of both nodes (196.64 USD/h).
    # Goodput: productive 140 of 360 node-s, the running attempt counted as running: its steps
    # after its restore are not lost (a failed one's would be recomputed).
    # Stragglers: the epoch that ended at 310 s named rank 1 (r1's epoch 1 is another attempt's).
    assert polls[1] == (
        f"job r1-retry1 Running (attempt 2); step 30; images/s 21.3; {OLDER}; ETA 0:03:30; cost "
        "USD 9.83; projected USD 21.30 at the ETA; budget --max-cost 50 USD: 9.83 spent (20%); "
        "goodput 38.9%; stragglers epoch 3: rank 1 on node-1 at 1.45x the median rank"
    )
    assert polls[0].endswith("; stragglers - (no epoch has ended yet)")
    assert polls[2].startswith(
        f"job r1-retry1 Completed (attempt 2); step 30; images/s 21.3; {OLDER}; ETA - (ended); "
        "cost USD 10.92; projected USD 10.92 (ended); "
    )
    assert ledger.startswith("r1 (2 nodes, failed), r1-retry1 (2 nodes)")
    assert "goodput: 35.0%" in ledger  # the final ledger: tests/azure/test_jobs_ledger.py's


def test_an_unknown_job_is_one_line_before_any_poll(clock, ml_client, outputs_file, capsys):
    from azure.core.exceptions import ResourceNotFoundError

    ml_client.return_value.jobs.get.side_effect = ResourceNotFoundError("no such job")
    assert main(["jobs", "watch", "nope", "--outputs", str(outputs_file())]) == 2
    assert capsys.readouterr().err == "error: no job named 'nope' in the stack's workspace\n"
    assert clock.sleeps == []


def test_the_measured_pace_against_the_estimate_tagged_on_the_job(
    clock, ml_client, outputs_file, capsys
):
    basis = "model (99.0% of linear) from a 8-GPU rate published, not measured here"
    tags = {IMAGES_TAG: "32.0", BASIS_TAG: basis}
    serve(ml_client.return_value, clock.storage, lambda: clock.now, **tags)
    assert main([*WATCH, "--outputs", str(outputs_file())]) == 0
    polls = capsys.readouterr().out.split("\nledger of ", 1)[0].splitlines()
    # No step batch yet: the prediction, no ratio, no ETA.
    assert f"; estimate 32.0 images/s, measured/predicted - ({basis}); ETA - (no step" in polls[0]
    # At 310 s, the batch of steps 21-30: 10 steps and 640 samples in 30 s. 70 steps left: at the
    # measured 1/3 step/s, 210 s; at 64 samples a step and the predicted 32 images/s, 140 s.
    measured = 640 / 30
    left = (100 - 30) * (640 / 10) / 32.0
    assert (
        f"; images/s {measured:.1f}; estimate 32.0 images/s, measured/predicted "
        f"{measured / 32.0:.2f} ({basis}); ETA 0:03:30 at the measured pace, "
        f"{timedelta(seconds=left)} at the estimate; cost USD 9.83; " in polls[1]
    )
    assert f"measured/predicted 0.67 ({basis}); ETA - (ended);" in polls[2]


def test_a_users_script_has_no_estimate_and_says_why(clock, ml_client, outputs_file, capsys):
    serve(ml_client.return_value, clock.storage, lambda: clock.now, **{SCRIPT_TAG: "train.py"})
    assert main([*WATCH, "--outputs", str(outputs_file())]) == 0
    polls = capsys.readouterr().out.split("\nledger of ", 1)[0].splitlines()
    assert (
        "; estimate - (no estimate on this job: a user's script (azdl estimate prices the "
        "built-in flavours' models only)); ETA 0:03:30; " in polls[1]
    )


def test_a_tag_that_is_no_figure_is_one_error_line(clock, ml_client, outputs_file, capsys):
    serve(ml_client.return_value, clock.storage, lambda: clock.now, **{IMAGES_TAG: "fast"})
    assert main([*WATCH, "--outputs", str(outputs_file())]) == 2
    assert capsys.readouterr().err == (
        "error: tag azdl.estimate_images_per_s 'fast' on the job: expected images/s above 0\n"
    )


def test_a_local_run_whose_azdl_train_was_killed_ends_failed_at_its_last_event(tmp_path, capsys):
    """`azdl train` records the attempt's start with its pid, and its end when the workers end;
    killed in between, it leaves the start alone: watch ends the attempt as failed, at its last
    event. (A run followed to its end: tests/training/test_train_cli.py.)"""
    import json
    import subprocess
    import sys

    from azdl import local_ledger

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that has ended: as a killed `azdl train`'s
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "attempt-local-1.json").write_text(
        json.dumps({"name": "local-1", "start_ms": 1_000, "pid": gone.pid})
    )
    lines = [
        {"t_ms": 3_000, "event": "first_step", "step": 1, "samples": 8},
        {"t_ms": 9_000, "event": "steps", "step": 20, "steps": 19, "samples": 152},
    ]
    (folder / "events-local-1-round-0-host-9.jsonl").write_text("".join(
        json.dumps(e | {"attempt": "local-1", "round": 0, "process": "host-9"}) + "\n"
        for e in lines))  # fmt: skip
    ((attempt, status),) = local_ledger.timeline(folder, 60_000, [])
    assert (status, attempt.end_ms, attempt.failed) == ("Failed", 1_000, True)  # no events given
    assert main(["jobs", "watch", "--events-dir", str(folder), "--every", "1"]) == 1
    polls, ledger = capsys.readouterr().out.split("\nledger of ", 1)
    assert polls.startswith("job local-1 Failed (attempt 1); step 20; ")
    assert ledger.startswith("local-1 (1 node, failed)\n")
    assert re.search(r"\nbilled total +8\.0 ", ledger), ledger  # 1 s to 9 s: the last event


def test_watch_takes_a_job_or_a_local_runs_folder(tmp_path, capsys):
    assert main(["jobs", "watch", "r1", "--events-dir", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err == "error: azdl jobs watch: a JOB (r1) or --events-dir, not both\n"
    )
    assert main(["jobs", "watch", "--events-dir", str(tmp_path)]) == 2
    assert "no attempt-*.json in it" in capsys.readouterr().err
    assert main(["jobs", "watch"]) == 2
    assert capsys.readouterr().err.startswith("error: azdl jobs watch: name a JOB")
