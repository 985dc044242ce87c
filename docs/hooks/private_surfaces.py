"""The private SDK surfaces the product code touches: found with `ast`, listed with why in
`private_surfaces.yaml`, shown on docs/architecture.md ("Upgrade hazards").

A private surface is a name of another package (the standard library's too) that starts with one
underscore: an imported module or name (`from pulumi.runtime.sync_await import _sync_await`), an
attribute of an imported module (`rpc._special_sig_key`), an attribute of an object that the
project itself never defines (`parser._actions`, `getattr(job, "_to_job")`), or a dotted module
name in a string (a logger's). The list may also name internals without an underscore (a module
that its package does not export); the scan cannot find new ones of those, only tell whether the
listed ones are still imported.
"""

import ast
import importlib.util
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LIST_FILE = Path(__file__).with_name("private_surfaces.yaml")
# The product: every Python file in these folders (tests are not product code).
PRODUCT = ("azdl", "infra", "training", "policies", "docs", "scripts", "benchmarks", "examples")
_ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr", "delattr"}
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


@dataclass(frozen=True)
class Use:
    """One place that touches another package's name. `name` is dotted from the package where
    the import says where it comes from, else `.attribute` (an object's, of unknown type)."""

    name: str
    file: str
    line: int

    @property
    def private(self) -> bool:
        return any(_private(part) for part in self.name.split("."))


def product_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in PRODUCT for p in (root / folder).rglob("*.py"))


def own_modules(files: list[Path], root: Path = ROOT) -> set[str]:
    """Top-level names that are the project's: its folders and every module stem in them (the
    pack, the hooks and the benchmarks import siblings through sys.path)."""
    return {p.relative_to(root).parts[0] for p in files} | {p.stem for p in files}


def own_names(trees: list[ast.Module]) -> set[str]:
    """Every underscore name the project defines: functions, classes, variables, parameters,
    and attributes it sets on `self`/`cls` or declares in a class body."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
    return {n for n in names if _private(n)}


@cache
def _installed(top: str) -> bool:
    return top in sys.stdlib_module_names or importlib.util.find_spec(top) is not None


def _package(text: str, own: set[str]) -> bool:
    """Whether dotted `text` starts with another package's name (a logger's, a module's)."""
    top = text.split(".")[0]
    return top not in own and not _private(top) and _installed(top)


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def uses_in(tree: ast.Module, file: str, own: set[str], defined: set[str]) -> list[Use]:
    """Every name of another package that `tree` imports, and every private one it touches."""
    imported: dict[str, str] = {}  # local name -> dotted name in its package
    found: list[Use] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in own:
                    local = alias.asname or alias.name.split(".")[0]
                    imported[local] = alias.name if alias.asname else local
                    found.append(Use(alias.name, file, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in own:
                continue
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.append(Use(f"{node.module}.{alias.name}", file, node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts = _dotted(node)
            if parts and parts[0] in imported:
                found.append(Use(".".join([imported[parts[0]], *parts[1:]]), file, node.lineno))
            elif (
                _private(node.attr)
                and node.attr not in defined
                and not (parts and parts[0] in own)  # an attribute of one of the project's modules
            ):
                found.append(Use(f".{node.attr}", file, node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTRIBUTE_CALLS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in defined
        ):
            found.append(Use(f".{node.args[1].value}", file, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if _DOTTED.match(text) and Use(text, "", 0).private and _package(text, own):
                found.append(Use(text, file, node.lineno))
    return found


def scan(root: Path = ROOT, files: list[Path] | None = None) -> list[Use]:
    """The uses of other packages' names in `files` (default: the product's)."""
    files = product_files(root) if files is None else files
    trees = {p: ast.parse(p.read_text(), str(p)) for p in files}
    own, defined = own_modules(product_files(root), root), own_names(list(trees.values()))
    return [
        use
        for path, tree in trees.items()
        for use in uses_in(tree, str(path.relative_to(root)), own, defined)
    ]


@dataclass(frozen=True)
class Surface:
    package: str  # the distribution, as pip names it
    names: tuple[str, ...]  # dotted from the package's import name, or `.attribute`
    why: str
    check: str  # what to check on an upgrade


def listed(path: Path = LIST_FILE) -> list[Surface]:
    return [
        Surface(e["package"], tuple(e["names"]), e["why"].strip(), e["check"].strip())
        for e in yaml.safe_load(path.read_text())
    ]


def covers(listed_name: str, use: Use) -> bool:
    """Whether a listed name stands for `use`: the same name, a module the use is inside of,
    or (for an object's attribute) the same last part."""
    if use.name.startswith("."):
        return listed_name.rsplit(".", 1)[-1] == use.name[1:]
    return use.name == listed_name or use.name.startswith(listed_name + ".")


def unlisted(uses: list[Use], surfaces: list[Surface]) -> list[Use]:
    names = [n for s in surfaces for n in s.names]
    return [u for u in uses if u.private and not any(covers(n, u) for n in names)]


def unused(uses: list[Use], surfaces: list[Surface]) -> list[str]:
    return [n for s in surfaces for n in s.names if not any(covers(n, u) for u in uses)]


def where(name: str, uses: list[Use]) -> list[str]:
    return sorted({u.file for u in uses if covers(name, u)})


def markdown() -> str:
    uses, surfaces = scan(), listed()
    lines = ["| package | surface | used in | why | check on an upgrade |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for s in surfaces:
        files = sorted({f for n in s.names for f in where(n, uses)})
        cells = [
            s.package,
            "<br>".join(f"`{n}`" for n in s.names),
            "<br>".join(f"`{f}`" for f in files),
            s.why,
            s.check,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
