"""The folder a `--script` job uploads as its code: exactly the files azure-ai-ml will upload,
through its own ignore-file functions, checked against Azure ML's snapshot limits before anything
is sent (docs/architecture.md, "Code folder")."""

from dataclasses import dataclass
from pathlib import Path

from azdl.errors import AzdlError

# Azure ML's limit on a job's code snapshot (learn.microsoft.com/azure/machine-learning/
# how-to-save-write-experiment-files, "Storage limits of experiment snapshots").
MAX_BYTES = 300 * 1000 * 1000
MAX_FILES = 2000


@dataclass(frozen=True)
class CodeFolder:
    root: Path
    files: dict[str, int]  # path relative to root (posix) -> size in bytes
    ignore_file: Path | None  # the .amlignore or .gitignore in force, if any

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    def has(self, path: Path) -> bool:
        """Whether `path` (absolute, inside root) is uploaded."""
        return path.relative_to(self.root).as_posix() in self.files

    def has_folder(self, path: Path) -> bool:
        prefix = path.relative_to(self.root).as_posix().rstrip("/") + "/"
        return any(name.startswith(prefix) for name in self.files)

    def largest_entries(self, by_files: bool = False, count: int = 5) -> list[tuple[str, int, int]]:
        """(name, bytes, files) of the top-level files and folders that weigh most (or hold the
        most files), biggest first."""
        sizes: dict[str, list[int]] = {}
        for name, size in self.files.items():
            top = name.split("/", 1)[0] + ("/" if "/" in name else "")
            entry = sizes.setdefault(top, [0, 0])
            entry[0] += size
            entry[1] += 1
        ranked = sorted(sizes.items(), key=lambda item: -item[1][1 if by_files else 0])
        return [(name, size, files) for name, (size, files) in ranked[:count]]


def scan(root: Path) -> CodeFolder:
    """The files azure-ai-ml would upload from `root`, with their sizes."""
    from azure.ai.ml._utils._asset_utils import get_ignore_file, get_upload_files_from_folder

    root = root.resolve()
    ignore = get_ignore_file(root)
    files = {}
    for local, remote in get_upload_files_from_folder(root, ignore_file=ignore):
        files[remote] = Path(local).stat().st_size
    return CodeFolder(root, files, Path(ignore.path) if ignore.exists() else None)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def check(root: Path, max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES) -> CodeFolder:
    """scan(root), or a clear error if it is above Azure ML's snapshot limits."""
    folder = scan(root)
    total, count = folder.total_bytes, len(folder.files)
    if total > max_bytes or count > max_files:
        ignore = (
            f"its ignore file is {folder.ignore_file.name}"
            if folder.ignore_file
            else "it has no .amlignore or .gitignore"
        )
        biggest = ", ".join(
            f"{name} ({files} files, {_mb(size)})"
            for name, size, files in folder.largest_entries(by_files=count > max_files)
        )
        raise AzdlError(
            f"code folder {folder.root} is too large to upload as a job's code: {count} files, "
            f"{_mb(total)} (Azure ML's limit for a job snapshot: {max_files} files, "
            f"{_mb(max_bytes)}); {ignore}. Biggest entries: {biggest}. Leave data, "
            "checkpoints and virtual environments out with a .amlignore (gitignore syntax) in "
            "that folder, or stage data with `azdl data stage` and read it from AZDL_DATA_DIR"
        )
    if count == 0:
        raise AzdlError(f"code folder {folder.root} uploads no files (is everything ignored?)")
    return folder
