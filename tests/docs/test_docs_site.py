"""The docs site builds strictly (a broken link, a missing page, a missing benchmark results file
or a stale generated section fails), and what it generates is what the code says."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import docs_hooks  # noqa: E402


@pytest.fixture(scope="module")
def plans(tmp_path_factory, shipped_plans) -> Path:
    """The shipped stacks' plans, rendered once for the session, where the docs hooks read them."""
    folder = tmp_path_factory.mktemp("plans")
    for stack, doc in shipped_plans.items():
        (folder / f"{stack}.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def site(tmp_path_factory, plans) -> Path:
    """The whole site, built as `make docs` builds it."""
    out = tmp_path_factory.mktemp("site")
    result = build_docs(["-d", str(out)], plans)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "WARNING" not in result.stderr, result.stderr[-4000:]
    return out


def build_docs(args: list[str], plans: Path) -> subprocess.CompletedProcess:
    """The build `make docs` runs (scripts/build-docs.sh, no quiet flag: with `-q` mkdocs drops
    its warnings and strict mode never aborts), with the stacks' plans rendered once."""
    env = os.environ | {"AZDL_DOCS_PLANS": str(plans)}
    return subprocess.run(
        [str(ROOT / "scripts" / "build-docs.sh"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip


def test_make_docs_runs_the_same_build():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^docs:.*\n\tscripts/build-docs\.sh$", make, re.M), "make docs"
    assert " -q" not in (ROOT / "scripts" / "build-docs.sh").read_text()


def test_a_broken_link_fails_the_build(tmp_path, plans):
    """A planted broken link in a copy of the docs: the same build must abort and name it."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a") as page_file:
        page_file.write("\nSee [the missing page](no-such-page.md).\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config |= {"docs_dir": str(docs), "site_dir": str(tmp_path / "site")}
    config["hooks"] = [str(ROOT / h) for h in config["hooks"]]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = build_docs(["-f", str(tmp_path / "mkdocs.yml")], plans)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-2000:]
    assert "'no-such-page.md'" in output and "Aborted with 1 warnings in strict mode" in output


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text()


def test_every_page_in_docs_is_in_the_nav_and_built(site):
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[1].join(["nav:", ""]))
    listed = set(re.findall(r"[\w-]+\.md", json.dumps(nav)))
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}
    for name in listed - {"index.md"}:
        assert (site / name[:-3] / "index.html").is_file(), name


def test_the_build_code_under_docs_is_not_published(site):
    """docs/hooks holds the build's own code (the MkDocs hook): mkdocs.yml excludes it, or every
    file in it would be copied into the site as it is."""
    assert (ROOT / "docs" / "hooks" / "docs_hooks.py").is_file()
    assert not (site / "hooks").exists()
    assert not list(site.rglob("*.py"))


def test_every_azdl_command_has_its_section_in_the_cli_reference(site):
    html = page(site, "cli")
    commands = docs_hooks.cli_commands()
    assert {"azdl submit", "azdl data stage", "azdl bench"} <= set(commands)
    for command in commands:
        assert f"<code>{command}</code>" in html, command


def test_every_config_key_is_in_the_reference(site):
    from infra.config_schema import reference_rows

    html = page(site, "configuration")
    keys = [row.path for row in reference_rows()]
    assert len(keys) == 56 and "cluster.maxNodes" in keys and "operators[].objectId" in keys
    assert "resourceGroups.platform" in keys and "resourceGroups.data" in keys
    for key in keys:
        assert f"<code>{key if '.' in key else 'azdl:' + key}</code>" in html, key


def test_the_plan_tree_and_diff_are_todays_program(site, shipped_plans):
    from azdl.review.diff import diff, render_text
    from azdl.review.tree import render_tree

    html = page(site, "review")
    tree_line = render_tree(shipped_plans["dev"]).splitlines()[0]
    assert tree_line.replace("(", "(") in html
    first = render_text(diff(shipped_plans["dev"], shipped_plans["prod"])).splitlines()[0]
    assert first.replace(">", "&gt;") in html


def test_every_benchmark_figure_comes_from_a_results_file_with_its_date(site):
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    included = re.findall(r'--8<-- "(benchmarks/results/[\w-]+\.md)"', text)
    assert len(included) >= 4
    html = page(site, "benchmarks")
    for path in included:
        results = (ROOT / path).read_text()
        assert re.search(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC .* load average", results), path
        assert "Command: `" in results
        assert re.search(r"Measured \d{4}-\d\d-\d\d", html)
        assert (ROOT / path).with_suffix(".json").is_file()


def test_an_unknown_generator_fails_the_build():
    with pytest.raises(Exception, match="no generator 'nonsense'"):
        docs_hooks.on_page_markdown(
            "x\n<!-- azdl:generate nonsense -->\n", type("P", (), {"file": type("F", (), {
                "src_path": "x.md"})})(), None, None,
        )  # fmt: skip


def test_the_readme_is_short_and_leads_to_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 15_000, len(readme.encode())  # a five-minute read
    first_screen = "\n".join(readme.splitlines()[:60]).lower()
    for topic in ("deploy", "cost", "first job", "own training code"):
        assert topic in first_screen, topic
    for link in re.findall(r"\]\((docs/[\w/.-]+\.md)(?:#[\w-]+)?\)", readme):
        assert (ROOT / link).is_file(), link
    for command in ("make demo", "make test", "pulumi stack init", "pulumi up", "pulumi stack rm"):
        assert command in readme, command


def test_the_readme_cost_at_a_glance_is_what_plan_estimates(shipped_plans):
    from azdl.review import cost
    from azdl.review.prices import load_prices

    readme = (ROOT / "README.md").read_text()
    for stack in ("dev", "prod"):
        row = re.search(rf"^\| {stack} \| (\d+) \| (\d+) \|$", readme, re.M)
        assert row, f"README has no cost row for {stack}"
        est = cost.estimate(shipped_plans[stack])
        assert est.unpriced == []
        assert (int(row[1]), int(row[2])) == (round(est.max_per_hour), round(est.idle_per_month))
    assert f"as of {load_prices(region='westeurope').date}" in readme


def test_the_estimate_page_shows_what_azdl_estimate_computed(site):
    """Table, recommendation, sources and plot of the estimate page come from one run of
    `azdl estimate -s prod --deadline 12h` at build time."""
    doc, png, _ = docs_hooks.estimate_prod()
    html = page(site, "estimate")
    rec = doc["recommendation"]
    assert f"Recommendation: {rec['nodes']} × {rec['vmSize']} ({rec['priority']})" in html
    assert f"{rec['costUsd']:,.0f} USD (estimate)" in html
    assert "published, not measured here" in html
    assert "not read (--quota reads it from a deployed stack)" in html
    assert (site / "estimate" / "prod.png").read_bytes() == png
    assert 'src="prod.png"' in html  # the page is estimate/index.html
