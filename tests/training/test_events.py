"""training.events: what rank 0 writes, what other ranks do not, and a folder that cannot be
written, which never fails a step and is reported once at the end."""

import json
import signal

import pytest

from training import events


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """The module as a new process sees it, its folder under tmp_path."""
    monkeypatch.setattr(events, "_log", None)
    monkeypatch.setattr(events, "_opened", False)
    for name in (*events.RANK_ENVS, events.ROUND_ENV, "AZUREML_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(events.DIR_ENV, str(tmp_path / "events"))
    monkeypatch.setenv(events.ATTEMPT_ENV, "job-1")
    return tmp_path / "events"


def test_rank_0_writes_every_event_with_its_attempt_and_round(fresh, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv(events.ROUND_ENV, "2")
    events.started()
    events.restored(40, 1.5)
    for step in range(41, 46):
        events.step(step, samples=16)
    with events.checkpoint(45):
        pass
    events.end(45)
    events.log().close()
    (path,) = fresh.glob("events-job-1-round-2-*.jsonl")  # one file: this process's
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [e["event"] for e in lines] == [
        "started",
        "restore",
        "first_step",
        "steps",
        "checkpoint_start",
        "checkpoint_end",
        "end",
    ]
    assert {(e["attempt"], e["round"]) for e in lines} == {("job-1", 2)}
    assert lines[1]["step"] == 40 and lines[1]["ms"] == 1500
    # steps 42-45 in one line, at the time of step 45, flushed before the checkpoint
    assert (lines[3]["step"], lines[3]["steps"], lines[3]["samples"]) == (45, 4, 64)
    assert lines[3]["t_ms"] <= lines[4]["t_ms"]
    found = events.read(fresh)
    assert [e for e in found if e["event"] != "last_step"] == lines
    (last,) = [e for e in found if e["event"] == "last_step"]
    assert (last["step"], last["round"]) == (45, 2)


def test_an_epoch_carries_its_finite_metrics_and_its_stragglers(fresh, monkeypatch):
    """What the report's loss curve and watch's stragglers read (azdl.epochs); numpy's scalars
    are numbers too (TensorFlow's loss is a float32); NaN and the rest are left out."""
    import numpy as np

    monkeypatch.setenv("RANK", "0")
    events.step(7, 16)
    events.epoch(1, {"loss": np.float32(0.5), "accuracy": 0.25, "lr": float("nan"),
                     "note": "text"}, [(1, "node-1", 1.4567)])  # fmt: skip
    events.epoch(2, {"loss": float("inf")}, None)
    events.log().close()
    found = [e for e in events.read(fresh) if e["event"] == "epoch"]
    assert [(e["epoch"], e["step"], e["values"], e["stragglers"]) for e in found] == [
        (1, 7, {"loss": 0.5, "accuracy": 0.25}, [{"rank": 1, "host": "node-1", "ratio": 1.457}]),
        (2, 7, {}, None),
    ]


def test_other_ranks_write_nothing(fresh, monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    events.started()
    events.step(1, 8)
    assert events.log() is None and not fresh.exists()


def test_a_folder_that_cannot_be_written_fails_no_step(fresh, monkeypatch, capsys):
    fresh.parent.mkdir(exist_ok=True)
    fresh.write_text("a file where the folder should be")
    for step in range(1, 4):
        events.step(step, 8)
    events.end(3)
    events.log().close()
    err = capsys.readouterr().err
    assert err.count("azdl events:") == 1, err
    assert "event lines could not be written" in err and "misses them" in err


@pytest.mark.slow  # starts a Python process
def test_a_sigkilled_writer_still_tells_its_last_step(fresh):
    """As mpirun and a torn-down container end a failed job's survivors: the steps since the
    last line are in no line, but the `.last` record has the last one (the ledger's count of
    steps lost depends on it)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import os, signal
        from training import events
        for step in range(1, 6):
            events.step(step, 8)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], timeout=30)
    assert done.returncode == -signal.SIGKILL
    found = events.read(fresh)
    lines = [e["step"] for e in found if e["event"] != "last_step"]
    assert max(lines, default=0) < 5  # the lines: batched, lost
    (last,) = [e for e in found if e["event"] == "last_step"]
    assert (last["step"], last["attempt"]) == (5, "job-1")
