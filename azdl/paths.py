"""The files and folders a user names on the command line, checked with one wording: a folder
where a file belongs, or a file where a folder belongs, is said to be one (not "missing", nor
the operating system's "Is a directory"), with what was expected there."""

from pathlib import Path

from azdl.errors import AzdlError


def existing_file(
    path: Path | str, option: str, expected: str, missing: str = "no such file"
) -> Path:
    """`path`, a file; else one error naming the option, what was given and `expected`."""
    path = Path(path)
    if path.is_dir():
        raise AzdlError(f"{option} {path} is a folder; expected {expected}")
    if not path.is_file():
        raise AzdlError(f"{option} {path}: {missing}")
    return path


def folder_or_nothing(path: Path | str, option: str, expected: str) -> Path:
    """`path`, unless something other than a folder is there (a folder that does not exist yet
    is made by the caller)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise AzdlError(f"{option} {path} is a file; expected {expected}")
    return path
