"""The PR review workflow is valid YAML and calls only azdl subcommands and flags that exist."""

import re
import shlex
from pathlib import Path

import yaml

from azdl.cli import build_parser

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "review.yml"


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def test_workflow_runs_existing_azdl_commands_and_options():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert set(workflow["jobs"]) == {"offline-plan", "pulumi-preview"}
    scripts = "\n".join(
        step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]
    )
    calls = re.findall(r"(?:bin/azdl|-m azdl) ([^\n|>;)]*)", scripts)
    assert {c.split()[0] for c in calls} == {"plan", "diff", "policy"}
    commands = _subparsers()
    for call in calls:
        words = shlex.split(call.replace("$", ""))
        known = {s for a in commands[words[0]]._actions for s in a.option_strings}
        for flag in (w for w in words[1:] if w.startswith("--")):
            assert flag in known, (call, flag)
    assert "pulumi preview --diff" in scripts and "--policy-pack policies" in scripts
