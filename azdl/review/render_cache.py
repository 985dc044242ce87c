"""Plans kept for reuse: a stack renders again only when something the render read has changed.

`python -m azdl.review.render_cache STACK_FILE INPUTS_FILE PROGRAM` is the render
`azdl.review.plan` runs in a fresh interpreter: it prints `azdl.review.render`'s manifest of
the project's PROGRAM (exit CONFIG_ERROR_EXIT
for an invalid config, the message on stderr), with every input recorded through the
interpreter's audit events (PEP 578; docs.python.org/3/library/audit_events.html): each file
opened for reading (`open`) and each folder listed (`os.listdir`, `os.scandir`: globs of the
build contexts, the import system's look-ups), plus the file of every module loaded (an import
may read only a module's .pyc). INPUTS_FILE gets their fingerprints: a file of Python's own or of
an installed package (INSTALLED) by its size and modification time, which every install
rewrites; any other (the stack file, the program, the build contexts) by the SHA-256 of its
content; a folder by the SHA-256 of its sorted entries. The interpreter, the PULUMI_*
environment and the provider's cloud variables (ARM_ENVIRONMENT, ...) are part of it too.

An entry (`cache_dir()/<stack>-<hash of the stack file's path>.json`) holds the fingerprints and
the manifest. `lookup` hands the manifest back only when every fingerprint is what it was.
"""

import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from azdl import project
from infra.azure_facts import PROVIDER_CLOUD_ENV

FORMAT = "azdl.render-cache/v1"
CONFIG_ERROR_EXIT = 3  # exit code of the render for an invalid config
# The environment the Pulumi runtime reads (its settings), and the provider's cloud variables,
# which the program reads where the provider does; the program reads no other
# (tests/review/test_render_cache.py holds it to that).
ENV_PREFIXES = ("PULUMI_",)
ENV_NAMES = PROVIDER_CLOUD_ENV
# What the machine is doing, not what it renders from (psutil, which the Pulumi SDK imports,
# reads /proc/stat): never an input of a plan.
MACHINE_STATE = ("/proc/", "/sys/", "/dev/")


class Recorder:
    """The files and folders this interpreter reads, from its audit events."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.folders: set[str] = set()

    def __call__(self, event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int):  # an open file descriptor: its file was recorded already
                return
            writing = flags & (os.O_WRONLY | os.O_RDWR) if mode is None else set(mode) & set("wax+")
            if not writing:
                self.files.add(os.path.abspath(os.fsdecode(path)))
        elif event in ("os.listdir", "os.scandir"):
            path = args[0]
            if not isinstance(path, int):
                self.folders.add(os.path.abspath(os.fsdecode(path if path is not None else ".")))

    def start(self) -> "Recorder":
        sys.addaudithook(self)
        return self

    def inputs(self) -> dict[str, Any]:
        """The fingerprints of what was read (see the module docstring)."""
        modules = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        files = {
            f for f in self.files | {m for m in modules if m}
            if not f.endswith(".pyc") and not f.startswith(MACHINE_STATE)
        }  # fmt: skip
        return fingerprints(files, self.folders)


def environment() -> dict[str, Any]:
    return {
        "python": sys.version,
        "executable": sys.executable,
        "env": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES) or k in ENV_NAMES
        },
    }


# Python's own files and the installed packages': fingerprinted by size and modification time.
INSTALLED = tuple(
    {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, *sysconfig.get_paths().values())}
)


def installed(path: str) -> bool:
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(root) for root in INSTALLED)


def file_fingerprint(path: str) -> str | None:
    """None for a path that is not a file now (gone, or a folder)."""
    try:
        if not installed(path):
            return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
        stat = os.stat(path)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return f"stat:{stat.st_size}:{stat.st_mtime_ns}" if os.path.isfile(path) else None


def folder_fingerprint(path: str) -> str | None:
    try:
        entries = sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return "sha256:" + hashlib.sha256("\0".join(entries).encode()).hexdigest()


def fingerprints(files: set[str], folders: set[str]) -> dict[str, Any]:
    found = {f: file_fingerprint(f) for f in sorted(files)}
    listed = {d: folder_fingerprint(d) for d in sorted(folders)}
    return {
        **environment(),
        "files": {f: v for f, v in found.items() if v is not None},
        "folders": {d: v for d, v in listed.items() if v is not None},
    }


def unchanged(inputs: dict[str, Any]) -> bool:
    """Whether everything `inputs` fingerprinted is as it was."""
    if {k: inputs.get(k) for k in environment()} != environment():
        return False
    return all(file_fingerprint(f) == v for f, v in inputs["files"].items()) and all(
        folder_fingerprint(d) == v for d, v in inputs["folders"].items()
    )


def entry_path(stack_file: Path, cache_dir: Path) -> Path:
    stack_file = stack_file.resolve()
    digest = hashlib.sha256(str(stack_file).encode()).hexdigest()[:12]
    name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return cache_dir / f"{name}-{digest}.json"


def cache_dir() -> Path:
    """The project's kept plans."""
    return project.out_dir() / "cache" / "render"


def lookup(stack_file: Path, cache_dir: Path) -> dict[str, Any] | None:
    """The manifest rendered last from `stack_file`, if nothing it read has changed since."""
    path = entry_path(stack_file, cache_dir)
    try:
        entry = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # none, or damaged: rendered and rewritten
        return None
    if entry.get("format") != FORMAT or not unchanged(entry["inputs"]):
        return None
    return entry["manifest"]


def store(
    stack_file: Path, inputs: dict[str, Any], manifest: dict[str, Any], cache_dir: Path
) -> Path:
    """Keep `manifest` with the fingerprints of what its render read (written whole, then
    renamed, so a reader never sees half an entry)."""
    path = entry_path(stack_file, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps({"format": FORMAT, "inputs": inputs, "manifest": manifest}))
    os.replace(partial, path)
    return path


def main(argv: list[str]) -> int:
    """Print the manifest of STACK_FILE under PROGRAM and write what its render read to
    INPUTS_FILE."""
    stack_file, inputs_file, program = argv
    recorder = Recorder().start()
    # Imported once the recorder runs: the program and the SDK it imports are inputs too.
    from azdl.review import manifest, render
    from infra.config import ConfigError

    try:
        document = render.render(Path(stack_file), Path(program))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return CONFIG_ERROR_EXIT
    sys.stdout.write(manifest.dumps(document))
    Path(inputs_file).write_text(json.dumps(recorder.inputs()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
