"""The README's plan tree and dev -> prod diff are the real output of today's program: a change
to infra/ that alters them fails here until the README shows what reviewers will now see."""

import re
from pathlib import Path

from azdl.review.diff import diff, render_text
from azdl.review.tree import render_tree

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _block_after(marker: str, fence: str) -> str:
    tail = README.split(marker, 1)[1]
    return re.search(rf"```{fence}\n(.*?)```", tail, re.S).group(1)


def test_readme_tree_is_what_plan_dev_prints(shipped_plans):
    shown = _block_after("The tree `azdl plan dev` prints", "")
    assert shown == render_tree(shipped_plans["dev"])


def test_readme_diff_is_the_real_dev_to_prod_diff(shipped_plans):
    shown = _block_after("azdl diff out/plan/dev.json out/plan/prod.json (full output)", "diff")
    assert shown == render_text(diff(shipped_plans["dev"], shipped_plans["prod"]))
