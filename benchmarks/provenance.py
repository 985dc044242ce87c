"""Which code a results file measured, and whether that code has changed since.

A benchmark declares the paths its figures depend on (git pathspecs from the repository root:
its own script, the modules it times, the entry modules of the processes it starts).
`measured(paths)` adds every repository module those Python files import, directly or not
(read with `ast`, imports inside functions included), and records the commit (`git rev-parse
HEAD`) and the uncommitted changes of the tree at that moment. `freshness(record)` compares
those paths between the recorded commit and HEAD (`git diff`): a change in any of them makes
the figure stale. Without a commit, or without the git history to compare against, it says so;
it never passes quietly.
"""

import ast
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("azdl", "infra", "policies", "training")  # the repository's importable packages
# The results writer: it dates and stores the figures and times nothing, so a change to it
# leaves every figure as it was.
RECORDERS = ("benchmarks/bench_results.py", "benchmarks/provenance.py")
SHOWN = 3  # changed files and commits named in a stale verdict; the rest are counted


class GitError(Exception):
    """git could not answer: not a checkout, no git, or an unknown commit."""


def git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    except FileNotFoundError as e:
        raise GitError("git is not installed") from e
    if done.returncode != 0:
        raise GitError(done.stderr.strip() or f"git {' '.join(args)} exited {done.returncode}")
    return done.stdout


def _module_file(name: str, near: Path, root: Path) -> list[Path]:
    """The repository files `import name` runs: the module and its packages' __init__.py, or,
    for a name outside PACKAGES, a module beside the importing file (a benchmark's sibling)."""
    parts = name.split(".")
    base = root if parts[0] in PACKAGES else near
    files = []
    for depth in range(1, len(parts) + 1):
        stem = base.joinpath(*parts[:depth])
        for candidate in (stem / "__init__.py", stem.with_suffix(".py")):
            if candidate.is_file():
                files.append(candidate)
    return files


def _statements(nodes: list[ast.stmt]):
    """Every statement, nested ones too (an import is a statement: expressions hold none)."""
    for node in nodes:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            yield from _statements(getattr(node, field, []))


def imports(path: Path, root: Path = ROOT) -> set[Path]:
    """The repository files that the module at `path` imports (anywhere in its source)."""
    found = set()
    package = path.parent.relative_to(root).parts if path.is_relative_to(root) else ()
    for node in _statements(ast.parse(path.read_text(), filename=str(path)).body):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            # `from a import b`: b may be a module of a, or a name defined in a
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            found.update(_module_file(name, path.parent, root))
    return found


def closure(files: list[Path], root: Path = ROOT) -> set[Path]:
    """`files` and every repository module they import, directly or not."""
    seen: set[Path] = set()
    todo = [f for f in files if f.suffix == ".py" and f.is_file()]  # not one deleted uncommitted
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(imports(path, root) - seen)
    return seen


def _changed_files(root: Path, *paths: str) -> list[str]:
    """Files (of `paths`, else all) with uncommitted changes: staged, unstaged, or untracked and
    not ignored."""
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *paths)
    entries, files = out.split("\0"), []
    while entries:
        entry = entries.pop(0)
        if entry:
            files.append(entry[3:])
            if entry[0] in "RC":  # a rename's second field is its old path
                entries.pop(0)
    return files


def measured(paths: list[str], root: Path = ROOT) -> dict:
    """The record of what a run measures now: commit, uncommitted changes, and the paths (the
    declared ones, then every other module their Python files import). Raises GitError when git
    cannot say which commit this is: a figure that does not know its commit is not written."""
    commit = git(root, "rev-parse", "--verify", "HEAD").strip()
    declared = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
                   *paths)  # fmt: skip
    missing = [p for p in paths if not git(root, "ls-files", "-co", "--exclude-standard", "--", p)]
    if missing:
        raise GitError(f"no file matches the measured path(s) {', '.join(missing)}")
    files = [f for f in declared.split("\0") if f]
    modules = {str(f.relative_to(root)) for f in closure([root / f for f in files], root)}
    all_paths = [*paths, *sorted(modules - set(files) - set(RECORDERS))]
    dirty = _changed_files(root)
    return {
        "commit": commit,
        "dirty": bool(dirty),
        "dirty_files": dirty,
        "dirty_measured": _changed_files(root, *all_paths),
        "paths": all_paths,
    }


@dataclass(frozen=True)
class Freshness:
    state: str  # "current", "stale" or "unchecked"
    text: str  # what the targets table says

    @property
    def current(self) -> bool:
        return self.state == "current"


def _short(commit: str) -> str:
    return commit[:7]


def _some(items: list[str]) -> str:
    shown = ", ".join(f"`{i}`" for i in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def freshness(record: dict, root: Path = ROOT) -> Freshness:
    """Whether the code a results file measured is still the code at HEAD in `root`."""
    commit, paths = record.get("commit"), record.get("paths")
    if not commit or not paths:
        return Freshness("stale", "stale: commit unknown")
    if record.get("dirty_measured"):
        changed = _some(record["dirty_measured"])
        return Freshness("stale", f"stale: measured uncommitted changes to {changed}")
    try:
        git(root, "rev-parse", "--verify", "HEAD")
    except GitError as e:
        return Freshness("unchecked", f"unchecked: not a git checkout ({e})")
    try:
        git(root, "cat-file", "-e", f"{commit}^{{commit}}")
    except GitError:
        shallow = git(root, "rev-parse", "--is-shallow-repository").strip() == "true"
        why = " (a shallow clone: `git fetch --unshallow`)" if shallow else ""
        return Freshness(
            "unchecked", f"unchecked: commit `{_short(commit)}` is not in this history{why}"
        )
    changed = git(root, "diff", "--name-only", commit, "HEAD", "--", *paths).split()
    if not changed:
        return Freshness("current", f"`{_short(commit)}`")
    later = git(root, "log", "--format=%h", f"{commit}..HEAD", "--", *paths).split()
    by = f" by {_some(later[::-1])}" if later else " (the measured commit is not an ancestor)"
    return Freshness("stale", f"stale since `{_short(commit)}`: {_some(changed)} changed{by}")


def table(results_dir: Path, root: Path = ROOT) -> str:
    """Every results file in `results_dir`, the commit it measured and whether its code is
    still HEAD's (the docs' Benchmarks page; the targets table judges only the target figures)."""
    lines = ["| results file | measured | code |", "| --- | --- | --- |"]
    for path in sorted(results_dir.glob("*.json")):
        record = json.loads(path.read_text())
        fresh = freshness(record, root)
        code = fresh.text if fresh.current else f"**{fresh.text}**"
        date = str(record.get("date", "?"))[:10]
        lines.append(f"| `{path.with_suffix('.md').name}` | {date} | {code} |")
    return "\n".join(lines) + "\n"
