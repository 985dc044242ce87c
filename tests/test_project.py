"""Checks on the project as a whole: lint, the CLI's help, the README's two commands, CI."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from azdl.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def test_ruff_lint_passes():
    result = subprocess.run(
        [str(VENV_BIN / "ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied():
    result = subprocess.run(
        [str(VENV_BIN / "ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _subcommand_paths(parser, prefix=()):
    """Every (sub)command path of the CLI, e.g. ("data", "stage")."""
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _subcommand_paths(sub, (*prefix, name))


def test_every_subcommand_has_help(capsys):
    paths = list(_subcommand_paths(build_parser()))
    assert ("train",) in paths
    for path in paths:
        with pytest.raises(SystemExit) as exit_info:
            main([*path, "--help"])
        assert exit_info.value.code == 0, path
        out = capsys.readouterr().out
        assert out.startswith("usage: azdl " + " ".join(path)), out[:200]


def test_unknown_subcommand_is_rejected(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["deploy-everything"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'deploy-everything'" in capsys.readouterr().err


def test_readme_keeps_exactly_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert [line for line in ci if line and not line.startswith(("#", "set ", "cd "))] == [
        "make test"
    ]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_no_secrets_in_tracked_files():
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    pattern = re.compile(
        r"AccountKey=[A-Za-z0-9+/=]{40,}|[?&]sig=[A-Za-z0-9%]{20,}"
        r"|password\s*[:=]\s*[\"'][^\"'$]{6,}",
        re.I,
    )
    azurite_dev_key = (
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    )
    hits = []
    for name in files:
        path = ROOT / name
        if not path.is_file() or path.suffix in {".png", ".gz", ".tfrecord"}:
            continue
        text = path.read_text(errors="ignore").replace(azurite_dev_key, "")
        hits += [f"{name}: {m.group(0)[:40]}" for m in pattern.finditer(text)]
    assert hits == []


def test_github_test_workflow_runs_the_readme_test_command():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "test.yml").read_text())
    steps = workflow["jobs"]["test"]["steps"]
    assert [s.get("run") for s in steps if s.get("name") == "make test"] == ["make test"]
    assert workflow["jobs"]["test"]["timeout-minutes"] <= 90
    # the targets table compares each figure's recorded commit with HEAD: no shallow clone
    (checkout,) = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout.get("with", {}).get("fetch-depth") == 0


def test_the_tests_read_the_shipped_stacks_not_the_stacks_folder():
    """README step 2 adds stacks/Pulumi.mine.yaml: no test may pick it up by listing stacks/
    (tests/shipped.py names the shipped ones)."""
    listing = re.compile(r"glob\(\s*[\"']Pulumi\.\*|stacks[\"']\)\s*\.(?:glob|iterdir|rglob)\(")
    found = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if listing.search(path.read_text())
    ]
    assert found == []
