"""`azdl submit --json` (name, URL, status: a stable document for scripts) and the warnings
submit gives for what is allowed but most likely a mistake."""

import json

import pytest

from azdl.cli import main


def test_json_prints_the_name_url_and_status_and_nothing_else(ml_client, outputs_file, capsys):
    code = main(["submit", "--outputs", str(outputs_file()), "--data-path", "x", "--json",
                 "--name", "r1"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {
        "schema": "azdl.submit-result/v1",
        "name": "r1",
        "url": "https://ml.azure.com/runs/r1",
        "status": "Starting",
    }


def test_json_with_wait_reports_the_final_status_and_keeps_the_logs_off_stdout(
    ml_client, outputs_file, capsys
):
    client = ml_client.return_value
    client.jobs.stream.side_effect = lambda name: print(f"log line of {name}")
    client.jobs.get.return_value.status = "Failed"
    argv = ["submit", "--outputs", str(outputs_file()), "--data-path", "x", "--name", "r2"]
    assert main([*argv, "--json", "--wait"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "Failed"
    assert "log line of r2" in captured.err


def test_json_is_refused_with_dry_run(ml_client, outputs_file, capsys):
    assert main(["submit", "--outputs", str(outputs_file()), "--json", "--dry-run"]) == 2
    assert "--json reports a submitted job" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, warned",
    [
        ([], True),
        (["--data-path", "imagenet"], False),
        (["--storage", "synthetic"], False),
        (["--storage", "nfs"], True),
    ],
)
def test_a_job_without_data_path_is_warned_about(outputs_file, capsys, extra, warned):
    assert main(["submit", "--outputs", str(outputs_file()), "--dry-run", *extra]) == 0
    err = capsys.readouterr().err
    assert ("warning: no --data-path: the job reads the shards from the root of" in err) is warned
