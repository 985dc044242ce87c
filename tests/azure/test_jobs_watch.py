"""`azdl jobs watch` on a retry that runs to its end (tests/azure/ledger_workspace.py): the
workspace answers as it stands at the fake clock's time, which moves only when the watch sleeps;
stdout is not a terminal, so each poll is one plain line."""

from datetime import timedelta

import pytest

from azdl.cli import main
from azdl.jobs import watch_job
from tests.azure.fake_clock import Clock
from tests.azure.ledger_workspace import T0, serve

START_S = 250  # the first poll: r1-retry1 has made its first step


@pytest.fixture
def clock(ml_client, monkeypatch):
    clock = Clock()
    clock.now = START_S
    serve(ml_client.return_value, lambda: clock.now)
    monkeypatch.setattr(watch_job, "SLEEP", clock.sleep)
    monkeypatch.setattr(watch_job, "NOW", lambda: T0 + timedelta(seconds=clock.now))
    return clock


def test_watch_follows_the_retry_to_its_end(clock, outputs_file, capsys):
    argv = ["jobs", "watch", "r1-retry1", "--every", "60", "--steps", "100"]
    assert main([*argv, "--outputs", str(outputs_file())]) == 0
    polls, ledger = capsys.readouterr().out.split("\nledger of ", 1)
    polls = polls.splitlines()
    assert clock.sleeps == [60, 60] and len(polls) == 3  # at 250, 310 and 370 s
    assert polls[0].startswith(
        "job r1-retry1 Running (attempt 2); step 11; images/s -; ETA - (no step batch yet)"
    )
    # At 310 s: the batch of steps 21-30 took 30 s (640 samples); 70 steps left at 1/3 step/s.
    # Cost: the ledger's billed node-time so far, r1's 100 s and r1-retry1's 80 s on 2 nodes at
    # 98.32 USD/h; projected: 210 s more of both nodes (196.64 USD/h).
    # Goodput: productive 140 of 360 node-s, the running attempt counted as running: its steps
    # after its restore are not lost (a failed one's would be recomputed).
    assert polls[1] == (
        "job r1-retry1 Running (attempt 2); step 30; images/s 21.3; ETA 0:03:30 (no estimate on "
        "this job); cost USD 9.83; projected USD 21.30 at the ETA; budget --max-cost 50 USD: "
        "9.83 spent (20%); goodput 38.9%"
    )
    assert polls[2].startswith(
        "job r1-retry1 Completed (attempt 2); step 30; images/s 21.3; ETA - (ended) (no estimate "
        "on this job); cost USD 10.92; projected USD 10.92 (ended); "
    )
    assert ledger.startswith("r1 (2 nodes, failed), r1-retry1 (2 nodes)")
    assert "goodput: 35.0%" in ledger  # the final ledger: tests/azure/test_jobs_ledger.py's


def test_an_unknown_job_is_one_line_before_any_poll(clock, ml_client, outputs_file, capsys):
    from azure.core.exceptions import ResourceNotFoundError

    ml_client.return_value.jobs.get.side_effect = ResourceNotFoundError("no such job")
    assert main(["jobs", "watch", "nope", "--outputs", str(outputs_file())]) == 2
    assert capsys.readouterr().err == "error: no job named 'nope' in the stack's workspace\n"
    assert clock.sleeps == []
