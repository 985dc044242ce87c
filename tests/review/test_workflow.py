"""The PR review workflow is valid YAML and calls only azdl subcommands and flags that exist."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
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


def _step(job: str, name_start: str) -> dict:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"][job]["steps"]
    return next(s for s in steps if s.get("name", "").startswith(name_start))


def test_workflow_runs_for_every_input_of_the_plan():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    paths = workflow[True]["pull_request"]["paths"]  # YAML 1.1 reads the key `on` as True
    for needed in ("infra/**", "stacks/**", "images/**", "training/**", "policies/**",
                   "azdl/review/**", "azdl/commands/**", "pyproject.toml",
                   ".github/workflows/review.yml"):  # fmt: skip
        assert needed in paths


def test_real_preview_waits_in_a_protected_environment():
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["pulumi-preview"]
    assert job["environment"] == "preview"
    text = WORKFLOW.read_text()
    assert "required reviewers" in text and "Reader role only" in text


def test_pr_comment_is_found_by_its_marker_and_updated():
    step = _step("offline-plan", "Comment on the pull request")
    marker = step["env"]["MARKER"]
    assert marker.startswith("<!--")
    assert "startswith(env.MARKER)" in step["run"] and "-X PATCH" in step["run"]
    assert "gh pr comment" not in step["run"]  # that would add a comment per push


@pytest.mark.parametrize("size", [100, 200_000])
def test_pr_comment_body_stays_under_githubs_limit(tmp_path, size):
    step = _step("offline-plan", "Comment on the pull request")
    script = re.search(r"<<'PY'\n(.*?)\nPY\n", step["run"], re.S).group(1)
    (tmp_path / "out" / "review").mkdir(parents=True)
    body = "## review\n```diff\n" + "~ x: 1 => 2\n" * (size // 12) + "```\n"
    (tmp_path / "out" / "review" / "comment.md").write_text(body)
    subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, check=True,
        env={"MARKER": step["env"]["MARKER"]},
    )  # fmt: skip
    posted = json.loads((tmp_path / "out" / "review" / "comment.json").read_text())["body"]
    assert posted.startswith(step["env"]["MARKER"] + "\n")
    assert len(posted) < 65_536
    assert posted.count("```") % 2 == 0
    if len(body) < 60_000:
        assert posted.endswith(body)
    else:
        assert "**Truncated.**" in posted
