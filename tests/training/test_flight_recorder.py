"""training.flight_recorder on real dumps (tests/training/fr_dumps/README.md says how they were
made): the rank that never reached the collective is named with its host; a rank without a
dump is "not seen yet", never the culprit; a desync is reported with both calls; when every rank
reached it, the verdict says so; the last restart round's dumps are read; the wait ends once a
rank's own failure is on record."""

import json
import pickle
import shutil
import time
from pathlib import Path

import pytest

from training import exits, flight_recorder, guard

DUMPS = Path(__file__).parent / "fr_dumps"


@pytest.fixture
def dumps(tmp_path):
    shutil.copytree(DUMPS, tmp_path / "fr")
    guard.record_host(tmp_path / "ranks", 0, "node-a")
    guard.record_host(tmp_path / "ranks", 1, "node-b")
    return tmp_path


def test_the_rank_behind_is_named_with_its_host_and_the_collective_it_missed(dumps):
    lines = flight_recorder.report(f"{dumps}/fr/rank_", 2, dumps / "ranks")
    assert lines == [
        "rank 1 on node-b never reached collective 5 (gloo:all_reduce) of process group 0: "
        "its last was collective 4; rank(s) 0 waited in it"
    ]


def test_a_rank_without_a_dump_is_not_seen_yet_and_never_the_culprit(dumps):
    (dumps / "fr" / "rank_1").unlink()  # rank 1, the one behind, has not shown its dump yet
    lines = flight_recorder.report(f"{dumps}/fr/rank_", 2, dumps / "ranks")
    assert lines == [
        "every rank of 1 reached its last collective: the hang is inside a collective (the "
        "network or the collective library), not a rank that stayed away",
        "not seen yet: no dump of rank(s) 1 (not judged: its process may have gone before "
        "dumping, or the job's folder does not show it yet)",
    ]


def test_a_desync_is_reported_with_both_calls(tmp_path):
    guard.record_host(tmp_path / "ranks", 0, "node-a")
    guard.record_host(tmp_path / "ranks", 1, "node-b")
    lines = flight_recorder.report(f"{DUMPS}/desync/rank_", 2, tmp_path / "ranks")
    assert lines == [
        "desync at collective 5 of process group 0: rank 0 on node-a called all_reduce (input "
        "sizes [[4]], dtypes ['Float']; output sizes [[4]], dtypes ['Float']); rank 1 on node-b "
        "called broadcast (input sizes [[4]], dtypes ['Float']; output sizes [[4]], dtypes "
        "['Float'])"
    ]


def test_the_last_restart_rounds_dumps_are_read(dumps):
    for round_ in (0, 1):
        folder = dumps / "fr" / f"round-{round_}"
        shutil.copytree(DUMPS / ("desync" if round_ else "."), folder,
                        ignore=shutil.ignore_patterns("desync", "*.md"))  # fmt: skip
    assert flight_recorder.round_prefix(f"{dumps}/fr/rank_", 1) == f"{dumps}/fr/round-1/rank_"
    (line,) = flight_recorder.report(f"{dumps}/fr/rank_", 2, None)
    assert line.startswith("(restart round 1) desync at collective 5")


def test_the_wait_ends_when_a_ranks_own_failure_is_on_record(dumps):
    (dumps / "fr" / "rank_1").unlink()
    record = exits.Record(rank=1, node="node-b", round=0, time=1.0, exit=1, signal=None,
                          kind=exits.USER, line="ValueError: bad batch")  # fmt: skip
    (dumps / "ranks" / "exit-1-round-0.json").write_text(json.dumps(record.__dict__))
    started = time.monotonic()
    flight_recorder.wait_for_dumps(f"{dumps}/fr/rank_", 2, 30, dumps / "ranks")
    assert time.monotonic() - started < 1
    assert flight_recorder.cause_on_record(dumps / "ranks") == record


def test_when_every_rank_reached_the_collective_no_rank_is_blamed(dumps):
    shutil.copy(dumps / "fr" / "rank_0", dumps / "fr" / "rank_1")
    (line,) = flight_recorder.report(f"{dumps}/fr/rank_", 2, None)
    assert line.startswith("every rank of 2 reached its last collective: the hang is inside")


def test_no_dump_at_all_is_said_plainly(tmp_path):
    (line,) = flight_recorder.report(f"{tmp_path}/rank_", 2, None)
    assert line == f"no flight-recorder dump at {tmp_path}/rank_<rank>: no rank could be named"


def test_a_dump_that_names_a_class_is_refused(tmp_path):
    (tmp_path / "rank_0").write_bytes(pickle.dumps(Path("/etc")))
    with pytest.raises(pickle.UnpicklingError, match="names pathlib"):
        flight_recorder.report(f"{tmp_path}/rank_", 1, None)


def test_the_wait_ends_when_a_node_has_stopped_the_job(dumps, monkeypatch):
    """A node whose gate failed stopped the job (training.job_stop): no dump is coming."""
    from training import job_stop

    (dumps / "fr" / "rank_1").unlink()
    job_stop.write(dumps / "stops", 1, "its health gate failed")
    monkeypatch.setenv(job_stop.STOP_DIR_ENV, str(dumps / "stops"))
    started = time.monotonic()
    flight_recorder.wait_for_dumps(f"{dumps}/fr/rank_", 2, 30, dumps / "ranks")
    assert time.monotonic() - started < 1
    assert flight_recorder.known_cause(dumps / "ranks").endswith(
        "stopped the job: its health gate failed"
    )
