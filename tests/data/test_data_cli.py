"""`azdl data …` without a storage service: argument hand-over to the training environment and
the errors that must come before any network call."""

import argparse
import json

import pytest

from azdl import staging
from azdl.cli import main
from azdl.commands import data
from azdl.errors import AzdlError
from training.copy_shards import COPY_OPTIONS
from training.dataprep.options import PREPARE_OPTIONS, SAMPLE_OPTIONS, add_options, to_argv


@pytest.mark.parametrize(
    ("options", "argv"),
    [
        (
            PREPARE_OPTIONS,
            [
                "--input",
                "in",
                "--output",
                "out",
                "--train-shards",
                "8",
                "--resize",
                "256",
                "--skip-bad",
                "--overwrite",
            ],
        ),
        (SAMPLE_OPTIONS, ["demo", "--classes", "3", "--validation-layout", "folders", "--messy"]),
        (COPY_OPTIONS, ["--source", "/mnt/blob", "--dest", "/mnt/nvme", "--timeout", "60"]),
    ],
)
def test_options_survive_the_hand_over_to_the_training_environment(options, argv):
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    parsed = parser.parse_args(argv)
    assert parser.parse_args(to_argv(parsed, options)) == parsed


def test_prepare_runs_the_converter_in_the_training_environment(monkeypatch):
    calls = []
    monkeypatch.setattr(data, "run_training_module", lambda m, a: calls.append((m, a)) or 0)
    assert main(["data", "prepare", "--input", "in", "--output", "out", "--skip-bad"]) == 0
    module, argv = calls[0]
    assert module == "training.dataprep.convert"
    assert argv[:4] == ["--input", "in", "--output", "out"] and "--skip-bad" in argv
    assert "--overwrite" not in argv


def test_stage_needs_a_manifest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(staging.CONNECTION_STRING_ENV, "UseDevelopmentStorage=true")
    assert main(["data", "stage", str(tmp_path), "--container", "data"]) == 2
    assert "no manifest at" in capsys.readouterr().err


def test_stage_refuses_a_connection_string_for_a_real_account():
    real = "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=bm90LWEta2V5;"
    with pytest.raises(AzdlError, match="only for the local emulator"):
        staging.container_client("data", None, real)


def test_stage_needs_an_account_and_a_container(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(staging.CONNECTION_STRING_ENV, raising=False)
    assert main(["data", "stage", str(tmp_path), "--account-url", "https://x.blob"]) == 2
    assert "no container" in capsys.readouterr().err
    outputs = tmp_path / "outputs.json"
    outputs.write_text("{}")
    assert (
        main(
            [
                "data",
                "stage",
                str(tmp_path),
                "--stack-outputs",
                str(outputs),
                "--account-url",
                "https://x.blob",
            ]
        )
        == 2
    )
    assert "not both" in capsys.readouterr().err


def test_stack_outputs_name_the_account_and_container(tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"dataContainerName": "data"}))
    with pytest.raises(AzdlError, match="has no dataAccountUrl"):
        staging.target_from_stack_outputs(outputs)
    url = "https://azdldevdata.blob.core.windows.net/"
    outputs.write_text(json.dumps({"dataAccountUrl": url, "dataContainerName": "data"}))
    assert staging.target_from_stack_outputs(outputs) == (url, "data")


def test_stage_lists_shards_missing_locally_before_any_upload(tmp_path, monkeypatch, capsys):
    from training.dataprep.manifest import Manifest, ShardEntry, SplitSummary

    shard = ShardEntry("train-00000-of-00001", "train", 1, 10, "0" * 32, "0" * 64)
    Manifest({"n1": 0}, {"train": SplitSummary(1, 1, {"n1": 1})}, [shard]).write(tmp_path)
    monkeypatch.setenv(staging.CONNECTION_STRING_ENV, "UseDevelopmentStorage=true")
    assert main(["data", "stage", str(tmp_path), "--container", "data"]) == 2
    assert "1 shard(s) listed in the manifest are not in" in capsys.readouterr().err
