"""The contract between azdl and a user's own script (`--script`), locally and on the cluster:
its folders as AZDL_* variables and {…} placeholders, and the image and launcher it needs, read
from its source. Stdlib only (docs/own-code.md)."""

import ast
import re
from pathlib import Path

from azdl.errors import AzdlError
from azdl.paths import existing_file

# placeholder name -> environment variable; the folders a script is told about
FOLDERS = {
    "data_dir": "AZDL_DATA_DIR",
    "checkpoint_dir": "AZDL_CHECKPOINT_DIR",
    "log_dir": "AZDL_LOG_DIR",
    "output_dir": "AZDL_OUTPUT_DIR",
}
THREADS_ENV = "AZDL_THREADS"
_PLACEHOLDER = re.compile(r"\{(" + "|".join(FOLDERS) + r")\}")

# Top-level modules a script imports -> the stack image that has them (keras/tf: tensorflow).
_TORCH = {"torch", "torchvision"}
_TENSORFLOW = {"tensorflow", "keras", "tf_keras"}


def substitute(args: list[str] | tuple[str, ...], values: dict[str, str | None]) -> list[str]:
    """`args` with every {placeholder} replaced by its folder; a clear error for a placeholder
    whose folder does not exist in this run (e.g. {data_dir} without data)."""

    def replace(match: re.Match) -> str:
        value = values.get(match[1])
        if value is None:
            raise AzdlError(
                f"the script arguments use {{{match[1]}}}, but this run has no such folder"
                + (" (no data: give --data locally, or a --storage other than synthetic)"
                   if match[1] == "data_dir" else "")
            )  # fmt: skip
        return value

    return [_PLACEHOLDER.sub(replace, arg) for arg in args]


def folder_environment(values: dict[str, str | None]) -> dict[str, str]:
    """AZDL_* variables for the folders that exist in this run."""
    return {FOLDERS[name]: value for name, value in values.items() if value is not None}


def check_script(script: Path) -> Path:
    """The script's absolute path, or a clear error if it is not a readable Python file."""
    existing_file(Path(script).expanduser(), "--script", "the Python file to run (*.py)")
    path = Path(script).expanduser().resolve()
    if path.suffix != ".py":
        raise AzdlError(
            f"--script {script}: expected a Python file (*.py); it runs as `python FILE`"
        )
    return path


def _source(script: Path) -> ast.AST | None:
    """The script's syntax tree; None if it does not parse."""
    try:
        return ast.parse(Path(script).read_text(errors="replace"))
    except SyntaxError:
        return None


def _imports(tree: ast.AST) -> set[str]:
    """The absolute modules the script imports (`import a.b`, `from a.b import c`: a.b)."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
    return modules


def detect_framework(script: Path) -> str | None:
    """'torch' or 'keras' (the TensorFlow image) from the script's imports; None if it imports
    neither or both, or does not parse."""
    tree = _source(script)
    if tree is None:
        return None
    modules = _imports(tree)
    # horovod.torch / horovod.tensorflow(.keras) / horovod.keras say it as well as the framework
    tops = {m.split(".")[0] for m in modules} | {
        m.split(".")[1] for m in modules if m.startswith("horovod.") and m.count(".") >= 1
    }
    torch, tensorflow = bool(tops & _TORCH), bool(tops & _TENSORFLOW)
    if torch == tensorflow:
        return None
    return "torch" if torch else "keras"


# What a worker of each kind of script lacks under the other launcher.
_WRONG_LAUNCHER = {
    "horovod": "only torchrun sets the RANK, WORLD_SIZE and MASTER_ADDR that env:// reads",
    "torchrun": "under torchrun each worker would be a Horovod job of size 1, training a model "
    "of its own",
}


def _process_groups(tree: ast.AST) -> list[ast.Call]:
    """The script's calls of torch.distributed's init_process_group (by any import name)."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None))
        == "init_process_group"
    ]


def detect_launcher(script: Path) -> tuple[str | None, str]:
    """(the launcher the script's source asks for, why, said of the script): horovod for a
    script that imports Horovod (`hvd.init()` reads what horovodrun or MPI give each process);
    torchrun for one that calls torch.distributed's init_process_group with the default env://
    initialisation (PyTorch's DDP tutorial) and imports no Horovod. None, with the reason, when
    it cannot be told: neither, both, another init_method, or a file that does not parse."""
    tree = _source(script)
    if tree is None:
        return None, "does not parse as Python"
    horovod = sorted(m for m in _imports(tree) if m == "horovod" or m.startswith("horovod."))
    groups = _process_groups(tree)
    methods = {
        keyword.value.value
        for call in groups
        for keyword in call.keywords
        if keyword.arg == "init_method" and isinstance(keyword.value, ast.Constant)
    }
    if horovod and groups:
        return None, f"imports {horovod[0]} and calls init_process_group"
    if horovod:
        return "horovod", f"imports {horovod[0]}"
    if not groups:
        return None, "neither imports Horovod nor calls init_process_group"
    if other := sorted(str(m) for m in methods if not str(m).startswith("env://")):
        return None, f"calls init_process_group with init_method={other[0]!r}"
    return "torchrun", "calls init_process_group (env://) and imports no Horovod"


def launcher_for(script: Path, asked: str | None, default: str) -> tuple[str, str | None]:
    """(the launcher, the line that says how azdl chose it, if it did): --launcher when given
    and not contradicted by the script's source, else what the source asks for, else `default`.
    An explicit launcher the script cannot run under is refused in one line."""
    found, why = detect_launcher(script)
    name = Path(script).name
    if asked is None:
        if found is not None:
            return found, f"launcher {found}: {name} {why}"
        return default, (
            f"launcher {default} (the default): {name} {why}; say --launcher torchrun for a "
            "torch.distributed script"
        )
    if found is not None and found != asked:
        raise AzdlError(
            f"--launcher {asked} does not fit {name}, which {why}: {_WRONG_LAUNCHER[asked]}; "
            f"leave --launcher out (it then follows the script) or say --launcher {found}"
        )
    return asked, None


def shadowed_imports(script: Path, runtime: Path) -> list[str]:
    """The modules of azdl's runtime package (`runtime`: its folder, `training`) the script
    imports but will not get: `python FILE` puts the script's folder first on sys.path, and a
    regular `training` package there (with __init__.py) is found instead of azdl's, so a module
    it lacks fails to import. azdl's own steps are not affected (azdl.runtime)."""
    own = Path(script).parent / runtime.name
    tree = _source(script)
    if tree is None or not (own / "__init__.py").is_file():
        return []
    wanted = {m.split(".")[1] for m in _imports(tree) if m.startswith(f"{runtime.name}.")}
    wanted |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == runtime.name and not node.level
        for alias in node.names
    }
    theirs = {p.stem for p in own.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    ours = {p.stem for p in runtime.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    return sorted(f"{runtime.name}.{m}" for m in wanted & ours - theirs)


def _called(node: ast.Call) -> str | None:
    """The called name: `f(...)` → f, `a.b.f(...)` → f."""
    return getattr(node.func, "id", None) or getattr(node.func, "attr", None)


def _scope_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a function's (or the module's) own body, not of functions defined in it."""
    nodes, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _scope_calls(scope: ast.AST) -> list[ast.Call]:
    return [node for node in _scope_nodes(scope) if isinstance(node, ast.Call)]


def teardown_hazards(script: Path) -> list[str]:
    """Where the script destroys its process group in the same function that builds its
    DistributedDataParallel model, after building it, directly or through a function of its own
    that does (`cleanup()`), as PyTorch's DDP tutorial does (pytorch/tutorials
    intermediate_source/ddp_tutorial.rst, its elastic_ddp.py, read 2026-11-29): the model's
    Reducer then holds the group's last reference, and the group dies later with the model,
    with the GIL held, which can hang a Gloo worker's exit (docs/torchrun.md, "Ending
    cleanly"). A `del` of the model between the two is the cure. One line per such function."""
    tree = _source(script)
    if tree is None:
        return []
    ddp_names = {"DistributedDataParallel"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name == "DistributedDataParallel" and alias.asname
    }
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    destroyers = {"destroy_process_group"} | {
        f.name
        for f in functions
        if any(_called(c) == "destroy_process_group" for c in _scope_calls(f))
    }
    found = []
    for scope in [tree, *functions]:
        nodes = _scope_nodes(scope)
        calls = [node for node in nodes if isinstance(node, ast.Call)]
        built = sorted(c.lineno for c in calls if _called(c) in ddp_names)
        destroyed = sorted((c.lineno, _called(c)) for c in calls if _called(c) in destroyers)
        # `model = DistributedDataParallel(...)` ... `del model` before the destroy: the cure
        models = {
            target.id
            for node in nodes
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _called(node.value) in ddp_names
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        dropped = [
            node.lineno
            for node in nodes
            if isinstance(node, ast.Delete)
            and any(isinstance(t, ast.Name) and t.id in models for t in node.targets)
        ]
        late = [
            (line, name)
            for line, name in destroyed
            if built and line > built[0] and not any(built[0] < d < line for d in dropped)
        ]
        if late:
            (line, name), *_ = late
            where = f"{scope.name}()" if isinstance(scope, ast.FunctionDef) else "the module"
            call = "destroy_process_group()" + (
                f" (through {name}())" if name != "destroy_process_group" else ""
            )
            found.append(
                f"{Path(script).name} line {line}: {call} in {where}, which builds "
                f"DistributedDataParallel (line {built[0]}): the model keeps the group until it "
                "goes, and the group then dies holding the GIL, which can hang the worker at "
                "exit; destroy it after the model is gone, e.g. once a function that trains has "
                'returned (docs/torchrun.md, "Ending cleanly")'
            )
    return found
