"""CLI conventions every `azdl` command shares: --version, -s/--stack, training options after
`--`, job names checked before Azure, and one `error:` line (exit 2) for bad input."""

import json
import re
from pathlib import Path

import azure.ai.ml
import pytest

from azdl import cli
from azdl.commands.options import JOB_NAME
from infra.config import ConfigError, load_config, read_stack_file

EXAMPLE_OUTPUTS = Path(__file__).resolve().parents[2] / "docs" / "stack-outputs.example.json"


def run_cli(capsys, *argv):
    """(exit code, stdout, stderr) of `azdl ARGV`, argparse's own exits included."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def subparsers(parser):
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            yield name, sub
            if sub._subparsers is not None:
                for deeper, subsub in subparsers(sub):
                    yield f"{name} {deeper}", subsub


def test_version(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and re.fullmatch(r"azdl \d+\.\d+\.\d+\n", out)


def test_every_command_that_takes_a_stack_takes_s_as_its_short_form():
    with_stack = 0
    for name, parser in subparsers(cli.build_parser()):
        options = {s for a in parser._actions for s in a.option_strings}
        if "--stack" in options:
            with_stack += 1
            assert "-s" in options, name
            positional = [a for a in parser._actions if not a.option_strings and a.nargs is None]
            args = parser.parse_args(["-s", "prod"] + ["x"] * len(positional))
            assert args.stack == "prod", name
    assert with_stack >= 10  # submit, bench, data stage, data fill-nfs, jobs *, cluster check


@pytest.mark.parametrize("command", [["train"], ["bench", "--local"], ["submit", "-s", "dev"]])
def test_a_training_option_before_the_double_dash_gets_a_hint(capsys, command):
    code, _, err = run_cli(capsys, *command, "--epochs", "3")
    assert code == 2
    assert "--epochs: not an option of" in err and "go after `--`" in err


def test_an_unknown_option_elsewhere_is_still_plainly_unrecognized(capsys):
    code, _, err = run_cli(capsys, "plan", "dev", "--epochs", "3")
    assert code == 2 and "unrecognized arguments: --epochs 3" in err


def azure_ml_run_id_pattern() -> re.Pattern:
    """The run-id (= job name) rule azure-ai-ml's own REST client enforces."""
    source = (
        Path(azure.ai.ml.__file__).parent / "_restclient/runhistory/operations/_runs_operations.py"
    ).read_text()
    return re.compile(re.search(r"\"run_id\", run_id, 'str', pattern=r'([^']+)'", source)[1])


NAMES = ["My Job!", "job", "a", "azdl-keras-2n-20261123-1200-ab12", "_job", "-job", "job_1",
         "job.1", "jöb", "x" * 256, "x" * 257, "1job", "job/1", ""]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_job_names_follow_azure_mls_own_rule(name):
    theirs = azure_ml_run_id_pattern()
    expected = bool(theirs.match(name)) and name.isascii()
    assert bool(JOB_NAME.fullmatch(name)) == expected


@pytest.mark.parametrize("command", [["submit"], ["data", "fill-nfs"]])
def test_a_bad_job_name_fails_before_azure_is_contacted(capsys, mocker, command):
    contacted = mocker.patch("azdl.jobs.stack_outputs.load_outputs")
    code, _, err = run_cli(
        capsys, *command, "--outputs", str(EXAMPLE_OUTPUTS), "--name", "My Job!", "--dry-run"
    )
    assert code == 2 and "'My Job!' is not a valid Azure ML job name" in err
    contacted.assert_not_called()


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--workers", "0"],
        ["train", "--workers", "two"],
        ["submit", "--nodes", "two", "--outputs", "x.json"],
        ["plan", "dev", "--workers", "0"],
        ["data", "stage", "shards", "--parallel-files", "0"],
    ],
)
def test_bad_counts_are_one_error_line(capsys, argv):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "error: argument" in err


@pytest.mark.parametrize("value", ["four", 2.5, 0, None, True, float("inf")])
def test_an_outputs_file_with_a_bad_cluster_size_is_one_error_line(capsys, tmp_path, value):
    outputs = json.loads(EXAMPLE_OUTPUTS.read_text())
    outputs["clusterMaxNodes"] = value
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    code, _, err = run_cli(capsys, "submit", "--outputs", str(path), "--dry-run")
    assert code == 2 and "clusterMaxNodes" in err


def test_a_float_cluster_size_from_pulumi_is_accepted(capsys, tmp_path):
    outputs = json.loads(EXAMPLE_OUTPUTS.read_text())
    outputs["clusterMaxNodes"] = 2.0
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    code, out, _ = run_cli(capsys, "submit", "--outputs", str(path), "--nodes", "2", "--dry-run")
    assert code == 0 and "instance_count: 2" in out


def test_a_flat_structured_key_points_to_pulumi_config_set_path():
    values = read_stack_file(Path("stacks/Pulumi.dev.yaml"))
    values["azdl:cluster.maxNodes"] = "4"  # what `pulumi config set azdl:cluster.maxNodes 4` writes
    with pytest.raises(ConfigError) as info:
        load_config(values, stack="dev")
    assert "pulumi config set --path 'azdl:cluster.maxNodes'" in str(info.value)


def test_a_binary_or_unreadable_outputs_file_is_one_error_line(capsys, tmp_path):
    binary = tmp_path / "outputs.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli(capsys, "submit", "--outputs", str(binary), "--dry-run")
    assert code == 2 and "not UTF-8 text" in err
    code, _, err = run_cli(capsys, "plan", "dev", "--prices", str(tmp_path))  # a directory
    assert code == 2 and "error:" in err
