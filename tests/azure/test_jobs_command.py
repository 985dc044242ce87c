"""`azdl jobs list | show | logs | cancel | download` with MLClient mocked, in azure-ai-ml's
JobOperations terms (list, get, stream, begin_cancel, download)."""

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from azure.core.exceptions import ResourceNotFoundError

from azdl.cli import main
from tests.azure.rest_jobs import rest_job


def job(name, status, minute, experiment="azdl", **tags):
    return SimpleNamespace(
        name=name, status=status, experiment_name=experiment, display_name=name,
        creation_context=SimpleNamespace(created_at=datetime(2026, 11, 24, 10, minute, tzinfo=UTC)),
        compute="gpu-cluster", studio_url=f"https://ml.azure.com/runs/{name}",
        tags={"azdl.framework": "keras"} | tags,
        outputs={"checkpoints": object(), "logs": object()},
    )  # fmt: skip


@pytest.fixture
def workspace(ml_client):
    """Three attempts of one job (the --max-retries chain), one other job, one elsewhere."""
    jobs = [
        job("r1", "Failed", 1),
        job("r1-retry1", "Failed", 2, **{"azdl.attempt": "2", "azdl.retry_of": "r1"}),
        job("r1-retry2", "Running", 3, **{"azdl.attempt": "3", "azdl.retry_of": "r1-retry1"}),
        job("b1", "Completed", 0),
        job("x1", "Completed", 4, experiment="other"),
    ]
    by_name = {j.name: j for j in jobs}
    client = ml_client.return_value
    client.jobs.list.side_effect = lambda **kw: iter(jobs)

    def get(name):
        if name not in by_name:
            raise ResourceNotFoundError(f"job {name} not found")
        return by_name[name]

    client.jobs.get.side_effect = get
    return client


def run(outputs_file, *argv):
    return main(["jobs", argv[0], "--outputs", str(outputs_file()), *argv[1:]])


def test_list_shows_the_experiments_jobs_newest_first(workspace, outputs_file, capsys):
    assert run(outputs_file, "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["r1-retry2", "r1-retry1", "r1", "b1"]
    assert lines[0].endswith("(attempt 3, retry of r1-retry1)")
    assert run(outputs_file, "list", "--json", "--limit", "2") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "azdl.jobs-list/v1" and document["experiment"] == "azdl"
    listed = document["jobs"]
    assert [j["name"] for j in listed] == ["r1-retry2", "r1-retry1"]
    assert listed[0]["created"] == "2026-11-24T10:03:00+00:00" and listed[0]["attempt"] == 3


def test_show_prints_the_chain_of_attempts_from_any_of_them(workspace, outputs_file, capsys):
    assert run(outputs_file, "show", "r1-retry1", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["schema"] == "azdl.job/v1"
    assert shown["status"] == "Failed" and shown["compute"] == "gpu-cluster"
    assert [(a["attempt"], a["name"], a["status"]) for a in shown["attempts"]] == [
        (1, "r1", "Failed"), (2, "r1-retry1", "Failed"), (3, "r1-retry2", "Running")]  # fmt: skip
    assert run(outputs_file, "show", "r1") == 0
    out = capsys.readouterr().out
    assert (
        "attempts:\n  1. r1: Failed  –\n  2. r1-retry1: Failed  –\n  3. r1-retry2: Running  –"
        in out
    )
    assert run(outputs_file, "show", "nope") == 2
    assert "no job named 'nope'" in capsys.readouterr().err


def test_logs_stream_a_job_and_give_a_finished_ones_as_json(
    workspace, outputs_file, capsys, mocker
):
    assert run(outputs_file, "logs", "b1") == 0
    workspace.jobs.stream.assert_called_once_with("b1")
    mocker.patch("azdl.jobs.workspace.job_logs", return_value="epoch 1\n")
    assert run(outputs_file, "logs", "b1", "--json") == 0
    logs = json.loads(capsys.readouterr().out)
    assert logs["schema"] == "azdl.job-logs/v1" and logs["logs"] == "epoch 1\n"
    assert run(outputs_file, "logs", "r1-retry2", "--json") == 2  # still running
    assert run(outputs_file, "logs", "r1") == 1  # a failed job's logs exit non-zero


def test_cancel_stops_a_running_job_and_refuses_an_ended_one(workspace, outputs_file, capsys):
    def cancel(name):
        workspace.jobs.get(name).status = "Canceled"
        return SimpleNamespace(result=lambda: None)

    workspace.jobs.begin_cancel.side_effect = cancel
    assert run(outputs_file, "cancel", "r1-retry2", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {
        "schema": "azdl.job-cancel/v1", "name": "r1-retry2", "status": "Canceled"}  # fmt: skip
    assert run(outputs_file, "cancel", "b1") == 2
    assert "has already ended (Completed)" in capsys.readouterr().err


def test_download_fetches_logs_and_outputs_to_a_local_folder(
    workspace, outputs_file, capsys, tmp_path
):
    def download(name, download_path, output_name=None, all=False):
        folder = Path(download_path)
        if all or output_name == "checkpoints":
            (folder / "named-outputs" / "checkpoints").mkdir(parents=True, exist_ok=True)
            (folder / "named-outputs" / "checkpoints" / "ckpt-3.index").write_text("x")
        if all:
            (folder / "user_logs").mkdir(exist_ok=True)
            (folder / "user_logs" / "std_log.txt").write_text("log")

    workspace.jobs.download.side_effect = download
    out = tmp_path / "b1-files"
    assert run(outputs_file, "download", "b1", "--out", str(out), "--json") == 0
    assert workspace.jobs.download.call_args.kwargs == {"download_path": str(out), "all": True}
    got = json.loads(capsys.readouterr().out)
    assert got["schema"] == "azdl.job-download/v1"
    assert got["files"] == ["named-outputs/checkpoints/ckpt-3.index", "user_logs/std_log.txt"]
    assert run(outputs_file, "download", "b1", "--out", str(tmp_path / "c"),
               "--output", "checkpoints") == 0  # fmt: skip
    assert workspace.jobs.download.call_args.kwargs["output_name"] == "checkpoints"
    assert run(outputs_file, "download", "b1", "--output", "weights") == 2
    assert "no output 'weights'; its outputs: checkpoints, logs" in capsys.readouterr().err
    assert run(outputs_file, "download", "r1-retry2") == 2  # still running


def test_show_and_list_print_what_each_job_has_cost(ml_client, outputs_file, capsys):
    from datetime import timedelta

    from azdl.jobs import budget
    from azdl.jobs.stack_outputs import load_outputs

    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    rate, _ = budget.hourly_rate(load_outputs(None, path), 2)  # what submit tags a job with
    now = datetime.now(UTC)
    done = rest_job("c1", "Completed", now - timedelta(hours=5), now - timedelta(hours=3.5),
                    **{"azdl.usd_per_hour": f"{rate:g}"})  # fmt: skip
    running = rest_job("c1-retry1", "Running", now - timedelta(hours=2), now - timedelta(hours=2),
                       **{"azdl.retry_of": "c1", "azdl.attempt": "2"})  # fmt: skip
    client = ml_client.return_value
    client.jobs.list.side_effect = lambda **kw: iter([done, running])
    client.jobs.get.side_effect = {"c1": done, "c1-retry1": running}.get

    assert main(["jobs", "show", "c1", "--outputs", str(path)]) == 0
    out = capsys.readouterr().out
    # finished: from its creation to its last change, 1.5 h, at the rate it was tagged with
    assert f"cost so far: {1.5 * rate:.2f} USD (1.50 h at {rate:g} USD/h (tag " in out
    assert main(["jobs", "show", "c1-retry1", "--outputs", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    # running, untagged: the stack's price for its 2 nodes, from its creation to now
    assert shown["cost"]["usd_per_hour"] == pytest.approx(rate)
    assert shown["cost"]["hours"] == pytest.approx(2.0, abs=0.01)
    assert [a["cost"]["usd"] for a in shown["attempts"]] == [
        pytest.approx(1.5 * rate, abs=0.01), pytest.approx(2.0 * rate, abs=0.5)]  # fmt: skip

    assert main(["jobs", "list", "--outputs", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("c1  Completed  ") and lines[1].endswith(f"  {1.5 * rate:.2f} USD")
    assert lines[0].startswith("c1-retry1  Running  ")
    assert float(lines[0].split("  ")[3].removesuffix(" USD")) == pytest.approx(2 * rate, abs=0.5)
