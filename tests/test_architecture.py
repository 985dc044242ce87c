"""The import rules of the product packages, read from their source with `ast` (nothing is
imported): no module imports a command but the CLI entry, nothing outside the CLI (the docs
hooks and the benchmarks included) imports azdl.commands at all, and no two modules import each
other, directly or around a loop, counting imports inside functions too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("azdl", "infra", "training", "policies")
# The commands' shared option helpers, which every command may import.
SHARED_OPTIONS = "azdl.commands.options"
# The CLI entry point registers the commands: the one module that imports them.
COMMAND_REGISTRY = "azdl.cli"
# Pulumi's policy host puts the pack's own folder on the import path, so `import rules` in
# policies/ loads policies/rules/.
OWN_PATH_ROOTS = ("policies",)
# Cycles in packages outside the jobs/CLI work, known and left to their owners (issue 29):
# each entry is one cycle's modules. Empty when there are none.
KNOWN_CYCLES: list[frozenset[str]] = []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imported(name: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The product modules an import statement of module `name` loads: for `from A import B`,
    A.B where that is a module, else A."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the importing module's package
            package = name.split(".")
            is_package = modules[name].name == "__init__.py"
            package = package[: len(package) - node.level + (1 if is_package else 0)]
            base = ".".join([*package, *([base] if base else [])])
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                   for alias in node.names]  # fmt: skip
    top = name.split(".")[0]
    if top in OWN_PATH_ROOTS:
        targets = [f"{top}.{t}" if f"{top}.{t.split('.')[0]}" in modules else t for t in targets]
    found = set()
    for target in targets:
        while target and target not in modules:  # `import a.b.c` of a function or attribute
            target = target.rpartition(".")[0]
        if target:
            found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the product modules it imports, anywhere in its source."""
    modules = product_modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {
            target
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in imported(name, node, modules)
            if target != name
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_a_command_but_the_cli_entry():
    graph = import_graph()
    commands = {name for name in graph if name.startswith("azdl.commands.")}
    assert commands, "no command modules found: is azdl/commands where this test looks?"
    offenders = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if name != COMMAND_REGISTRY
        for target in targets
        if target in commands and target != SHARED_OPTIONS
    )
    assert not offenders, (
        "commands parse and call the service layer (azdl.jobs, azdl.local, ...), never another "
        "command; shared options go in azdl.commands.options:\n" + "\n".join(offenders)
    )


def test_the_product_packages_have_no_import_cycle():
    found = cycles(import_graph())
    unknown = [sorted(cycle) for cycle in found if cycle not in KNOWN_CYCLES]
    assert not unknown, "import cycles (function-level imports included):\n" + "\n".join(
        " <-> ".join(cycle) for cycle in unknown
    )
    gone = [sorted(cycle) for cycle in KNOWN_CYCLES if cycle not in found]
    assert not gone, f"known cycles that no longer exist; remove them from KNOWN_CYCLES: {gone}"


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    """The reader itself: an import inside a function counts, and `from . import x` resolves."""
    modules = {"pkg": tmp_path / "__init__.py", "pkg.a": tmp_path / "a.py",
               "pkg.b": tmp_path / "b.py"}  # fmt: skip
    inner = ast.parse("def f():\n    from pkg.b import thing\n").body[0].body[0]
    assert imported("pkg.a", inner, modules) == {"pkg.b"}
    relative = ast.parse("from . import b").body[0]
    assert imported("pkg.a", relative, modules) == {"pkg.b"}
    assert imported("pkg", relative, modules) == {"pkg.b"}
    pack = {"policies": tmp_path / "__init__.py", "policies.rules": tmp_path / "rules.py"}
    assert imported("policies", ast.parse("import rules").body[0], pack) == {"policies.rules"}
    assert cycles({"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg": set()}) == [
        frozenset({"pkg.a", "pkg.b"})
    ]


# The CLI layer: the entry point and its argparse parser class (azdl.suggest, which reads the
# commands' shared option names). Everything else is a service, a hook or a benchmark, and
# commands are the CLI's only: nothing else imports one, not even the shared options.
CLI_LAYER = ("azdl.cli", "azdl.suggest")
# Code outside the product packages that runs the service layer: the docs build's hooks and the
# benchmark scripts (read by path: they are not packages).
OTHER_CODE = ("docs/hooks", "benchmarks")


def command_imports(name: str, tree: ast.AST) -> list[str]:
    """The azdl.commands modules (or the package) that module `name`'s source imports."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            named = [f"{base}.{alias.name}" for alias in node.names]  # `from azdl import commands`
            targets = [base] if base.startswith("azdl.commands") else named
        else:
            continue
        found += [t for t in targets if t == "azdl.commands" or t.startswith("azdl.commands.")]
    return sorted(set(found))


def test_nothing_outside_the_cli_imports_a_command():
    sources = dict(product_modules())
    for folder in OTHER_CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            sources[str(path.relative_to(ROOT))] = path
    assert any(name.endswith(".py") for name in sources), "no hooks or benchmarks found"
    offenders = sorted(
        f"{name} imports {target}"
        for name, path in sources.items()
        if name not in CLI_LAYER and not name.startswith("azdl.commands")
        for target in command_imports(name, ast.parse(path.read_text(), filename=str(path)))
    )
    assert not offenders, (
        "a command module is the CLI's: services, docs hooks and benchmarks import the service "
        "layer (azdl.local, azdl.review, azdl.jobs, ...) instead:\n" + "\n".join(offenders)
    )


# Package -> the product packages it must never import (docs/architecture.md, "Map of the code"):
# the Pulumi program and the training code stand alone; the images copy training/ only.
FORBIDDEN = {"infra": ("azdl", "training", "policies"), "training": ("azdl", "infra", "policies")}


def test_imports_point_one_way_between_the_packages():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        for target in targets
        if target.split(".")[0] in FORBIDDEN.get(name.split(".")[0], ())
    )
    assert not wrong, wrong


# What the policy pack may import besides itself (docs/architecture.md, "Map of the code"): the
# pure facts it checks against, which load no Pulumi program and call no Azure. Not training, a
# command or another azdl service, nor a module of the Pulumi program: CrossGuard hands the pack
# the resources the program declared; the pack declares none.
POLICY_IMPORTS = {
    "infra.azure_facts",
    "infra.catalogue",
    "infra.deployer",
    "azdl.review.arm",
    "azdl.review.deploy_order",
    "azdl.review.prices",
}


def test_the_policy_pack_imports_only_the_pure_facts_and_the_map_shows_them():
    graph = import_graph()
    used = {t for name, targets in graph.items() if name.startswith("policies")
            for t in targets if not t.startswith("policies")}  # fmt: skip
    assert used <= POLICY_IMPORTS, f"the policy pack imports {sorted(used - POLICY_IMPORTS)}"
    assert used == POLICY_IMPORTS, f"no longer imported: {sorted(POLICY_IMPORTS - used)}"
    map_block = (ROOT / "docs" / "architecture.md").read_text().split("```")[1]
    pack = map_block[map_block.index("policies.rules") :]
    missing = [name for name in sorted(used) if name.rpartition(".")[2] not in pack]
    assert not missing, f"docs/architecture.md's map does not show the pack importing {missing}"


MAX_MODULE_LINES = 600  # issue 29: a module a reader takes in at one sitting


def test_no_product_module_is_over_600_lines():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }
    assert len(sizes) > 100, "too few modules found: is this the repository root?"
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"split these modules (over {MAX_MODULE_LINES} lines): {over}"


# Test support lives in tests/ and only tests use it; a test module or a conftest is pytest's to
# load, never a library: imported by name it is a second copy of the module (pytest imports a
# test file by its own name), with its own caches, and the names shared go in a support module
# (tests/support/, or one beside its users that is not named test_*.py).
TESTS = ROOT / "tests"
OUTSIDE_TESTS = (*PACKAGES, "docs", "benchmarks", "scripts", "examples")


def imported_names(tree: ast.AST, path: Path) -> set[str]:
    """Dotted names of the modules a source imports (relative ones resolved from `path`), and
    for `from A import B` also A.B."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = list(path.relative_to(ROOT).parent.parts)
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, *([base] if base else [])])
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def test_only_tests_import_test_support():
    offenders = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for folder in OUTSIDE_TESTS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in imported_names(ast.parse(path.read_text(), filename=str(path)), path)
        if name == "tests" or name.startswith("tests.")
    )
    assert not offenders, "test support is for tests only:\n" + "\n".join(offenders)


def is_test_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def beside(name: str, path: Path) -> str:
    """A bare `import test_x` or `from conftest import …` as pytest resolves it: the importing
    file's folder is on sys.path (rootdir-relative imports), so it names the module beside it."""
    first = name.split(".", 1)[0]
    if is_test_module(first) and (path.parent / f"{first}.py").is_file():
        return ".".join([*path.relative_to(ROOT).parent.parts, name])
    return name


def test_no_module_imports_a_test_module_or_a_conftest():
    offenders = sorted(
        f"{path.relative_to(ROOT)} imports {resolved}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in imported_names(ast.parse(path.read_text(), filename=str(path)), path)
        if (resolved := beside(name, path)).startswith("tests.") and is_test_module(resolved)
    )
    assert not offenders, (
        "a test module or conftest is pytest's to load: put what is shared in a support module "
        "(tests/support/, or a module beside its users not named test_*):\n" + "\n".join(offenders)
    )


def test_the_test_import_reader_sees_relative_imports(tmp_path):
    path = TESTS / "infra" / "test_x.py"
    tree = ast.parse("from .test_infra_access import stack\nfrom tests.support import planted\n")
    names = imported_names(tree, path)
    assert "tests.infra.test_infra_access" in names and "tests.support.planted" in names
    assert is_test_module("tests.infra.conftest") and not is_test_module("tests.support.planted")
    importer = TESTS / "jobs" / "test_y.py"
    assert beside("test_bench.bench", importer) == "tests.jobs.test_bench.bench"
    assert beside("test_nowhere", importer) == "test_nowhere"  # no such file beside it
    training = TESTS / "training" / "test_z.py"
    assert beside("conftest", training) == "tests.training.conftest"
