"""A figure knows the commit it measured, and the targets table marks it stale when its code has
changed since (benchmarks/provenance.py): tried on a small git repository made here, and on a
clone of this one with a change planted in a measured path. The targets table of this checkout
holds no stale figure.

These start git (milliseconds each), so they are marked slow."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import provenance  # noqa: E402
import targets  # noqa: E402

pytestmark = pytest.mark.slow

# A repository of its own: no user's git configuration, signing or hooks.
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
        env=os.environ | GIT_ENV,
    ).stdout.strip()  # fmt: skip


def commit(root: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Path:
    """A benchmark that imports training.a, which imports training.b inside a function."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    commit(root, {
        "benchmarks/bench.py": "from training import a\n",
        "training/__init__.py": "",
        "training/a.py": "def f():\n    from training.b import g\n    return g()\n",
        "training/b.py": "def g():\n    return 1\n",
        "training/unrelated.py": "",
        "README.md": "hello\n",
    }, "first")  # fmt: skip
    return root


def test_a_record_names_the_commit_and_the_modules_the_benchmark_imports(repo):
    record = provenance.measured(["benchmarks/bench.py"], repo)
    assert record["commit"] == git(repo, "rev-parse", "HEAD")
    assert record["paths"] == [
        "benchmarks/bench.py", "training/__init__.py", "training/a.py", "training/b.py",
    ]  # fmt: skip
    assert record["dirty"] is False and record["dirty_files"] == record["dirty_measured"] == []
    assert provenance.freshness(record, repo) == provenance.Freshness(
        "current", f"`{record['commit'][:7]}`"
    )


def test_a_change_to_an_imported_module_makes_the_figure_stale_and_others_do_not(repo):
    record = provenance.measured(["benchmarks/bench.py"], repo)
    commit(repo, {"README.md": "changed\n", "training/unrelated.py": "x = 1\n"}, "elsewhere")
    assert provenance.freshness(record, repo).current
    planted = commit(repo, {"training/b.py": "def g():\n    return 2\n"}, "b")
    fresh = provenance.freshness(record, repo)
    assert fresh.state == "stale"
    assert fresh.text == (
        f"stale since `{record['commit'][:7]}`: `training/b.py` changed by `{planted[:7]}`"
    )


def test_the_list_of_results_files_marks_each_one(repo, tmp_path):
    """The docs' list of every results file (benchmark-code): current, stale, no commit."""
    results = tmp_path / "results"
    results.mkdir()
    record = provenance.measured(["benchmarks/bench.py"], repo) | {"date": "2026-11-29 08:00"}
    (results / "a.json").write_text(json.dumps(record))
    (results / "old.json").write_text(json.dumps({"date": "2026-11-24 21:20 UTC"}))
    assert provenance.table(results, repo).splitlines()[2:] == [
        f"| `a.md` | 2026-11-29 | `{record['commit'][:7]}` |",
        "| `old.md` | 2026-11-24 | **stale: commit unknown** |",
    ]
    commit(repo, {"benchmarks/bench.py": "from training import b\n"}, "bench")
    assert "| `a.md` | 2026-11-29 | **stale since `" in provenance.table(results, repo)


def test_a_run_on_uncommitted_changes_is_stale_and_says_which(repo):
    (repo / "training" / "a.py").write_text("def f():\n    return 3\n")
    (repo / "notes.txt").write_text("untracked\n")
    record = provenance.measured(["benchmarks/bench.py"], repo)
    assert record["dirty"] and sorted(record["dirty_files"]) == ["notes.txt", "training/a.py"]
    assert record["dirty_measured"] == ["training/a.py"]
    # the uncommitted edit no longer imports training.b: what was measured is what the tree held
    assert "training/b.py" not in record["paths"]
    fresh = provenance.freshness(record, repo)
    assert fresh == provenance.Freshness(
        "stale", "stale: measured uncommitted changes to `training/a.py`"
    )


def test_without_a_commit_or_without_history_it_says_so(repo, tmp_path):
    assert provenance.freshness({"paths": ["x"]}, repo).text == "stale: commit unknown"
    record = provenance.measured(["benchmarks/bench.py"], repo)
    plain = tmp_path / "plain"  # the files without .git, as from an archive
    plain.mkdir()
    fresh = provenance.freshness(record, plain)
    assert fresh.state == "unchecked" and fresh.text.startswith("unchecked: not a git checkout")
    commit(repo, {"README.md": "later\n"}, "later")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    assert provenance.freshness(record, shallow) == provenance.Freshness(
        "unchecked",
        f"unchecked: commit `{record['commit'][:7]}` is not in this history (a shallow clone: "
        "`git fetch --unshallow`)",
    )


def test_a_measured_path_that_matches_nothing_is_refused(repo):
    with pytest.raises(provenance.GitError, match=r"no file matches .* training/data\*\.py"):
        provenance.measured(["benchmarks/bench.py", "training/data*.py"], repo)


def test_the_release_check_names_each_stale_figure(monkeypatch, tmp_path):
    """`benchmarks/targets.py --check` (the end of `make bench`): a missing results file and a
    figure without a commit are named; a current one is not."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "p2_scaling.json").write_text(json.dumps({"date": "2026-11-24 21:20 UTC"}))
    monkeypatch.setattr(targets, "RESULTS_DIR", results)
    problems = targets.stale()
    assert "p2_scaling: stale: commit unknown" in problems
    assert "p5_staging: no results file" in problems


def test_a_change_planted_in_a_clone_makes_the_pytorch_input_figure_stale(tmp_path):
    """In a clone of this repository, a commit to the PyTorch loader turns the PyTorch input
    row of the targets table (what the docs show) from a verdict to stale, naming the commit."""
    clone = tmp_path / "clone"
    git(ROOT, "clone", "-q", "--shared", str(ROOT), str(clone))
    results = clone / "benchmarks" / "results"
    target = next(t for t in targets.TARGETS if t.results == "torch_input_pipeline")
    # As if measured at the clone's HEAD (the real file may be stale already: this test holds
    # the mechanism, not today's figure).
    record = json.loads((results / "torch_input_pipeline.json").read_text())
    record |= {"commit": git(clone, "rev-parse", "HEAD"), "dirty_measured": []}
    (results / "torch_input_pipeline.json").write_text(json.dumps(record))
    before = targets.row(target, results, root=clone)
    assert before[2].startswith(("met", "not met", "partly")), before
    loader = clone / "training" / "torch" / "loader.py"
    planted = commit(clone, {"training/torch/loader.py": loader.read_text() + "\n"}, "planted")
    after = targets.row(target, results, root=clone)
    assert after[1] == before[1] and "met" not in after[2]
    assert after[2].startswith("**stale since `") and f"`{planted[:7]}`" in after[2], after
