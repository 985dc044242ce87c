"""training.flight_recorder on real dumps (tests/training/fr_dumps/README.md says how they were
made): the rank that never reached the collective is named with its host; a rank without a
dump is named too; when every rank reached it, the verdict says so."""

import pickle
import shutil
from pathlib import Path

import pytest

from training import flight_recorder, guard

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


def test_a_rank_without_a_dump_is_named_too(dumps):
    lines = flight_recorder.report(f"{dumps}/fr/rank_", 3, dumps / "ranks")
    assert lines[1] == (
        "rank 2 on host unknown: no " + str(dumps / "ranks" / "rank-2.json") + " left no "
        "flight-recorder dump (its process was gone or stuck); rank(s) 0 waited in collective "
        "5 (gloo:all_reduce) of process group 0"
    )


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
