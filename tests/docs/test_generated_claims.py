"""What the prose says a generated block shows is true: its claims are on the block's marker
(`<!-- azdl:generate NAME expect="LINE" absent="TEXT" -->`, docs/hooks/docs_hooks.py), checked
against what the generator makes today; the docs build checks them too."""

import re
import sys
from pathlib import Path

import pytest
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import docs_hooks  # noqa: E402

# Pages and how many claims each must keep: a claim lost in an edit fails here.
CLAIMED = {"docs/review.md": 8, "docs/estimate.md": 4}
NEEDS_PLANS = {"diff-dev-prod", "diff-prod-dev-head", "plan-tree", "stack-outputs",
               "resource-counts", "cost-tables"}  # fmt: skip


def claims(page: str) -> list[tuple[str, str]]:
    """(generator, its marker's claims) of every marker on the page that makes claims."""
    found = docs_hooks.MARKER.findall((ROOT / page).read_text())
    return [(name, attrs) for _, name, attrs in found if attrs]


def test_only_the_listed_pages_make_claims_and_each_keeps_its_own():
    pages = ["README.md", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
    counted = {p: sum(len(docs_hooks.CLAIM.findall(a)) for _, a in claims(p)) for p in pages}
    assert {p: n for p, n in counted.items() if n} == CLAIMED


@pytest.mark.slow  # the stacks' plans: both rendered (seconds)
@pytest.mark.parametrize("page", sorted(CLAIMED))
def test_every_claim_about_a_generated_block_holds(page, shipped_plans, monkeypatch):
    monkeypatch.setattr(docs_hooks, "plans", lambda: shipped_plans)
    for name, attrs in claims(page):
        text = docs_hooks.GENERATORS[name]()
        assert docs_hooks.false_claims(attrs, text) == [], (page, name)


def test_a_claim_without_plans_holds_here_too():
    """The same check, for the generators that need no stack (in the fast tests)."""
    for page in CLAIMED:
        for name, attrs in claims(page):
            if name not in NEEDS_PLANS:
                assert docs_hooks.false_claims(attrs, docs_hooks.GENERATORS[name]()) == [], name


def page_object(path: str):
    return type("Page", (), {"file": type("File", (), {"src_path": path})})()


def test_a_false_claim_fails_the_build():
    """Planted: the rates table said to lack the dev stack's size, and to hold a line it has
    not."""
    for claim in ('absent="Standard_NC24ads_A100_v4"', 'expect="| Standard_X | …"'):
        page = f"Rates:\n\n<!-- azdl:generate published-rates {claim} -->\n"
        with pytest.raises(PluginError, match=re.escape(claim)):
            docs_hooks.on_page_markdown(page, page_object("estimate.md"), None, None)
    page = '<!-- azdl:generate published-rates absent="Standard_NC96ads_A100_v4" -->\n'
    assert "| Standard_NC24ads_A100_v4 |" in docs_hooks.on_page_markdown(
        page, page_object("estimate.md"), None, None
    )
