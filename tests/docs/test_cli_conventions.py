"""CLI conventions every `azdl` command shares: --version, bare `azdl` prints the help,
-s/--stack on every command that takes a stack, the nearest option suggested for an unknown one,
training options after `--` (pointed there only when the script has them), job names checked
before Azure, and one `error:` line (exit 2) for bad input."""

import json
import re
from pathlib import Path

import azure.ai.ml
import pytest

from azdl import cli
from azdl.commands.options import JOB_NAME, stacks_of
from azdl.errors import AzdlError
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


# The commands that take no stack, and why; every other command must take -s/--stack. A new
# command fails here until it does one or the other.
NO_STACK = {
    "train": "local workers on this machine",
    "data sample": "writes local files",
    "data prepare": "converts local files",
    "data copy": "runs on a cluster node, from folders the job mounts",
    "init": "writes a new project, which has stacks only once it is written",
    "setup-training": "makes the project's local training environment",
}
# Arguments a command needs besides the stack, so that `-s prod` alone parses.
JOB_ACTIONS = ("show", "logs", "cancel", "download", "ledger", "watch")
ALSO_NEEDS = (
    {"data stage": ["shards"], "diff": ["base.json"]}
    | {f"jobs {action}": ["JOB-NAME"] for action in JOB_ACTIONS}
    | {"jobs report": ["JOB-NAME", "--html"]}
)


def leaf_commands(parser, prefix=""):
    """(name, parser) of every command that runs something: `plan`, `data stage`, …"""
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            if sub._subparsers is None:
                yield f"{prefix}{name}", sub
            else:
                yield from leaf_commands(sub, f"{prefix}{name} ")


def test_every_command_takes_s_and_stack_unless_it_takes_no_stack_at_all():
    commands = dict(leaf_commands(cli.build_parser()))
    assert set(NO_STACK) < set(commands)
    assert {"plan", "diff", "policy", "submit", "bench", "data stage"} <= set(commands)
    for name, parser in commands.items():
        options = {s for a in parser._actions for s in a.option_strings}
        if name in NO_STACK:
            assert "--stack" not in options, name
            continue
        assert {"-s", "--stack"} <= options, (
            f"azdl {name} takes no -s/--stack: add it (azdl.commands.options) or list the "
            "command in NO_STACK with the reason"
        )
        for flag in ("-s", "--stack"):
            args = parser.parse_args([flag, "prod", *ALSO_NEEDS.get(name, [])])
            assert args.stack in ("prod", ["prod"]), name


@pytest.mark.parametrize("command", ["plan", "policy"])
def test_plan_and_policy_take_stacks_bare_and_with_s_alike(command):
    parse = dict(leaf_commands(cli.build_parser()))[command].parse_args
    assert stacks_of(parse(["dev", "prod"]), "X") == ["dev", "prod"]
    assert stacks_of(parse(["-s", "dev", "--stack", "prod"]), "X") == ["dev", "prod"]
    assert stacks_of(parse(["-s", "dev", "prod"]), "X") == ["dev", "prod"]
    with pytest.raises(AzdlError, match="no stack given"):
        stacks_of(parse([]), "X")


def test_diff_takes_the_stack_under_review_bare_or_with_s(capsys, mocker):
    load = mocker.patch("azdl.review.plan.load_plans", side_effect=AzdlError("stop here"))
    for argv in (["base.json", "dev"], ["base.json", "-s", "dev"], ["-s", "dev", "base.json"]):
        code, _, err = run_cli(capsys, "diff", *argv)
        assert code == 2 and "stop here" in err
        assert load.call_args.args[0] == ["base.json", "dev"]
    code, _, err = run_cli(capsys, "diff", "base.json", "prod", "-s", "dev")
    assert code == 2 and "give the plan under review once: HEAD or -s STACK" in err


@pytest.mark.parametrize(
    "command, option, script_option",
    [
        (["train"], "--epochs", "--epochs"),
        (["train"], "--epoch", "--epochs"),
        (["train", "--framework", "torch"], "--batchsize", "--batch-size"),
        (["bench", "--local"], "--epochs", "--epochs"),
        (["submit", "-s", "dev"], "--data-dir", "--data-dir"),
    ],
)
def test_an_option_of_the_training_script_given_before_the_double_dash_is_pointed_there(
    capsys, command, option, script_option
):
    code, _, err = run_cli(capsys, *command, option, "3")
    assert code == 2
    assert f"the training script has {script_option}" in err
    assert f"go after `--`: azdl {command[0]} [options] -- {script_option}" in err


@pytest.mark.parametrize(
    "argv, nearest",
    [
        (["plan", "-s", "dev", "--stak", "dev"], "--stack"),
        (["plan", "dev", "--no-tee"], "--no-tree"),
        (["submit", "--outputs", "o.json", "--nodse", "2"], "--nodes"),
        (["data", "stage", "shards", "--paralel-files", "2"], "--parallel-files"),
    ],
)
def test_an_unknown_option_suggests_the_nearest_azdl_option(capsys, argv, nearest):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and f"did you mean {nearest}?" in err
    assert "`--`" not in err  # none of them is an option of a training script


@pytest.mark.parametrize(
    "argv, unknown",
    [
        (["plan", "dev", "--epochs", "3"], "--epochs"),
        (["train", "--stak", "dev"], "--stak"),
        (["diff", "a", "b", "--zzz"], "--zzz"),
    ],
)
def test_an_option_no_one_has_gets_no_suggestion_and_no_pointer_to_the_double_dash(
    capsys, argv, unknown
):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and f"unrecognized arguments: {unknown}" in err
    assert "did you mean" not in err and "`--`" not in err


def test_for_the_users_own_script_the_double_dash_is_offered_only_conditionally(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "--script", str(tmp_path / "mine.py"), "--lr", "3")
    assert code == 2 and "if your script takes --lr, it goes after `--`" in err


def test_bare_azdl_prints_the_help(capsys):
    code, out, err = run_cli(capsys)
    assert code == 0 and out.startswith("usage: azdl") and err == ""
    assert "plan" in out and "--no-color" in out


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


DDP = str(Path(__file__).resolve().parents[2] / "examples" / "torchrun" / "ddp_minimal.py")


@pytest.mark.parametrize(
    ("argv", "given", "expected"),
    [
        (["train", "--script", "{dir}"], "--script {dir} is a folder",
         "expected the Python file to run (*.py)"),
        (["submit", "--outputs", "{dir}", "--dry-run"], "--outputs {dir} is a folder",
         "expected the file `pulumi stack output --json --stack STACK > FILE` writes"),
        (["submit", "--outputs", str(EXAMPLE_OUTPUTS), "--script", DDP, "--code", "{file}"],
         "--code {file} is a file", "expected the folder to upload as the job's code"),
        (["train", "--script", DDP, "--run-dir", "{file}"], "--run-dir {file} is a file",
         "expected the run's folder (made if missing) for its checkpoints/, logs/ and outputs/"),
        (["train", "--script", DDP, "--data", "{file}"], "--data {file} is a file",
         "expected the data folder"),
        (["policy", "{dir}"], "{dir} is a folder", "expected a plan manifest file (a stack's "
         ".json in the folder `azdl plan --out` writes), or a stack name"),
        (["diff", "{dir}", "dev"], "{dir} is a folder", "expected a plan manifest file"),
        (["plan", "dev", "--prices", "{dir}"], "price file {dir} is a folder",
         "expected a YAML file in the layout of"),
        (["estimate", "--bench", "{dir}"], "--bench {dir} is a folder",
         "expected `azdl bench`'s results.json"),
    ],
)  # fmt: skip
def test_a_folder_where_a_file_belongs_and_a_file_where_a_folder_belongs_are_named_so(
    capsys, tmp_path, argv, given, expected
):
    """Not "no such file" for a folder that is there, nor the system's "Is a directory: DIR" or
    "Not a directory: FILE/checkpoints" (issue 35): azdl's own line, naming what was given and
    what is expected, before anything is made."""
    paths = {"dir": str(tmp_path / "a-folder"), "file": str(tmp_path / "a-file")}
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    code, _, err = run_cli(capsys, *[a.format(**paths) for a in argv])
    assert code == 2
    assert f"error: {given.format(**paths)}; {expected}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "a-folder"]


@pytest.mark.parametrize(
    "argv, nearest",
    [(["plna"], "plan"), (["data", "stge"], "stage"), (["train", "--framework", "kears"], "keras")],
)
def test_a_mistyped_command_or_choice_suggests_the_nearest(capsys, argv, nearest):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and f"invalid choice: '{argv[-1]}'" in err
    assert err.rstrip().endswith(f"; did you mean {nearest}?")
    code, _, err = run_cli(capsys, "deploy-everything")
    assert code == 2 and "did you mean" not in err


# The commands that print no data a script would read, and why; every other one has --json.
NO_JSON = {
    "train": "streams the workers' output; its record is the run folder and the MLflow store",
    "data sample": "writes a dataset; its files are the record",
    "data prepare": "writes shards; the manifest.json it writes is the record",
    "data copy": "runs on a cluster node inside a job",
    "init": "writes a repository; its files are the record",
    "setup-training": "streams pip's and the build's output; its record is the environment",
    "jobs report": "writes an HTML page; its figures are `azdl jobs ledger --json`'s",
    "jobs watch": (
        "a live view (of a job, or with `--events-dir` of a local run); `azdl jobs ledger --json` "
        "is its record once the job ends"
    ),
}
SCHEMA_NAME = re.compile(r"\bazdl\.[a-z-]+/v\d+\b")


def json_commands() -> dict[str, str]:
    """command -> the schema its --json help names."""
    found = {}
    for name, parser in leaf_commands(cli.build_parser()):
        option = next((a for a in parser._actions if "--json" in a.option_strings), None)
        if option is not None:
            schema = SCHEMA_NAME.search(option.help or "")
            assert schema, f"azdl {name} --json names no schema in its help"
            found[name] = schema[0]
    return found


def test_every_command_that_prints_data_has_json_with_a_schema_and_the_docs_list_it():
    commands = dict(leaf_commands(cli.build_parser()))
    schemas = json_commands()
    assert set(NO_JSON) < set(commands)
    for name in commands:
        assert (name in schemas) != (name in NO_JSON), (
            f"azdl {name}: give it --json with a schema (azdl.console.print_json) or list it in "
            "NO_JSON with the reason"
        )
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text().split())
    for name, schema in schemas.items():
        assert f"`azdl {name} --json" in docs and f"(`{schema}`)" in docs, (name, schema)
    for name, why in NO_JSON.items():
        assert f"`azdl {name}`: {why}" in docs, name
