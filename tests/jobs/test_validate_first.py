"""No command creates a folder before its input is checked: a bad `azdl bench`, `azdl plan` or
`azdl train --script` leaves the file system as it was."""

from pathlib import Path

import pytest

from azdl.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "docs" / "stack-outputs.example.json")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--outputs", EXAMPLE, "--nodes", "0"], "expected counts of at least 1"),
        (["bench", "--outputs", EXAMPLE, "--nodes", "9"], "9"),
        (["bench", "--local", "--workers", "1,x"], "expected comma-separated whole numbers"),
        (["bench", "--local", "--", "--batch-size", "0"], "--batch-size: must be at least 1"),
    ],
)  # fmt: skip
def test_a_bad_bench_creates_no_report_folder(tmp_path, capsys, argv, message):
    report = tmp_path / "report"
    try:
        code = main([*argv[:1], "--out", str(report), *argv[1:]])
    except SystemExit as exc:  # the training script's own parser exits as argparse does
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not report.exists()


@pytest.mark.training_env  # `azdl train` looks for the training environment's launcher first
def test_a_bad_placeholder_in_a_script_run_creates_no_run_folder(tmp_path, capsys):
    script = tmp_path / "mine.py"
    script.write_text("import horovod.torch as hvd\n")
    run_dir = tmp_path / "run"
    argv = ["train", "--script", str(script), "--run-dir", str(run_dir), "--", "{data_dir}"]
    assert main(argv) == 2
    assert "use {data_dir}, but this run has no such folder" in capsys.readouterr().err
    assert not run_dir.exists()


def test_a_flavour_the_launcher_cannot_start_is_refused_before_the_demo_starts(capsys):
    assert main(["train", "--framework", "keras", "--launcher", "torchrun"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: the keras flavour runs under Horovod only")


def test_a_bad_stack_among_several_stops_plan_before_any_manifest_is_written(tmp_path, capsys):
    out = tmp_path / "plans"
    assert main(["plan", "dev", "nosuch", "--out", str(out)]) == 2
    assert "unknown stack 'nosuch'" in capsys.readouterr().err
    assert not out.exists()
