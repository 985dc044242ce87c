"""The user's project: the folder with a Pulumi.yaml, found as git finds a repository (from the
current folder up to the root, as Pulumi finds "the nearest parent folder containing a
Pulumi.yaml": pulumi.com/docs/iac/concepts/projects/, read 2026-11-29), or named by
`azdl --project-dir DIR`. Its stacks, `runs/`,
`out/` and plans live there; azdl's own files (the program, the pack, the images) live in the
installed packages instead (azdl.envs.PACKAGES_ROOT). This checkout is a project too: it has
the Pulumi.yaml of azdl's own stacks."""

from pathlib import Path

from azdl.errors import AzdlError

PROJECT_FILE = "Pulumi.yaml"
# What `azdl --project-dir` named for this command; None: found from the current folder.
_given: Path | None = None


def choose(folder: str | None) -> None:
    """Take `--project-dir` (checked before any command runs), or None to search again."""
    global _given
    _given = None
    if folder is None:
        return
    path = Path(folder)
    if not path.is_dir():
        what = "a file" if path.exists() else "no such folder"
        raise AzdlError(
            f"--project-dir {folder}: {what}; expected the folder that holds a project's "
            f"{PROJECT_FILE}"
        )
    if not (path / PROJECT_FILE).is_file():
        raise AzdlError(
            f"--project-dir {folder} has no {PROJECT_FILE}; expected a project's folder "
            "(`azdl init DIR` makes one)"
        )
    _given = path.resolve()


def root() -> Path:
    """The project's folder: `--project-dir`, else the nearest folder up from here with a
    Pulumi.yaml; one error line if there is none."""
    if _given is not None:
        return _given
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    raise AzdlError(
        f"no {PROJECT_FILE} in {here} or any folder above it; expected to run in a project "
        "(`azdl init DIR` makes one), or --project-dir DIR"
    )


def settings() -> dict:
    """The project's Pulumi.yaml, as a mapping."""
    import yaml

    path = root() / PROJECT_FILE
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise AzdlError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise AzdlError(f"{path}: expected a mapping (name:, runtime:, main:)")
    return document


def stacks_dir() -> Path:
    """Where the project's stack files are: Pulumi.yaml's `stackConfigDir`, else the project's
    own folder (Pulumi's default: www.pulumi.com/docs/iac/concepts/projects/project-file/)."""
    return root() / settings().get("stackConfigDir", ".")


def program() -> Path:
    """The project's program: Pulumi.yaml's `main` (a folder with __main__.py, or a file),
    else the project's folder."""
    return root() / settings().get("main", ".")


def runs_dir() -> Path:
    return root() / "runs"


def out_dir() -> Path:
    return root() / "out"
