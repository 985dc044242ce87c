"""The contract between azdl and a user's own script (`--script`), locally and on the cluster:
its folders as AZDL_* variables and {…} placeholders, and the image it needs. Stdlib only
(docs/own-code.md)."""

import ast
import re
from pathlib import Path

from azdl.errors import AzdlError

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
    path = Path(script).expanduser().resolve()
    if not path.is_file():
        raise AzdlError(f"--script {script}: no such file")
    if path.suffix != ".py":
        raise AzdlError(
            f"--script {script}: expected a Python file (*.py); it runs as `python FILE`"
        )
    return path


def detect_framework(script: Path) -> str | None:
    """'torch' or 'keras' (the TensorFlow image) from the script's imports; None if it imports
    neither or both, or does not parse."""
    try:
        tree = ast.parse(Path(script).read_text(errors="replace"))
    except SyntaxError:
        return None
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
    # horovod.torch / horovod.tensorflow(.keras) / horovod.keras say it as well as the framework
    tops = {m.split(".")[0] for m in modules} | {
        m.split(".")[1] for m in modules if m.startswith("horovod.") and m.count(".") >= 1
    }
    torch, tensorflow = bool(tops & _TORCH), bool(tops & _TENSORFLOW)
    if torch == tensorflow:
        return None
    return "torch" if torch else "keras"
