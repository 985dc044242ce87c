"""`azdl init DIR`: a team's platform repository, which takes azdl as a pinned dependency. Its
program builds azdl's platform from the stack's settings (infra.program.platform) and has a
place for the team's own resources; its stacks start as copies of the shipped ones. The files
it writes are the constants below, with the shipped stacks and the installed version."""

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from azdl.envs import PACKAGES_ROOT
from azdl.errors import AzdlError

SHIPPED_STACKS = PACKAGES_ROOT / "stacks"  # package data (the wheel's stacks/)
STACK_FILES = ("Pulumi.dev.yaml", "Pulumi.prod.yaml", "azdl.schema.json")

PROGRAM = '''\
"""This team's platform: azdl's, declared from the stack's `azdl:*` settings, and our own
resources below. `azdl plan dev` renders it offline; `pulumi up -s dev` deploys it."""

from infra.program import platform

azdl = platform()  # azdl's resources; its outputs by name (StackOutputs in infra/exports.py)

# Our own resources go here. They can take azdl's outputs, for example:
#
# from pulumi_azure_native import storage
#
# storage.StorageAccount(
#     "team-scratch",
#     resource_group_name=azdl.resource_group_name,
#     location=azdl.location,
#     kind="StorageV2",
#     sku=storage.SkuArgs(name="Standard_LRS"),
# )
'''

GITIGNORE = """# environments
.venv/
.venv-train/
__pycache__/
# what azdl writes here: local runs, plans and kept renders
runs/
out/
"""

AMLIGNORE = """# Left out of a job's code upload (`azdl submit --code .`), as .gitignore's syntax
.git/
.venv/
.venv-train/
__pycache__/
runs/
out/
"""


# The team's CrossGuard pack: azdl's policies, run from the installed package. Pulumi starts a
# Python pack as `python -u -m pulumi.policy ENGINE PACK_DIR` in the pack's folder, with the
# `virtualenv` option made absolute from there (pulumi/pulumi sdk/python/dist/
# pulumi-analyzer-policy-python, read 2026-11-29): ../.venv is the repository's .venv, where
# azdl is installed. (The package's own policies/PulumiPolicy.yaml names this checkout's venv.)
POLICY_PACK = {
    "PulumiPolicy.yaml": """\
# azdl's guardrails from the pinned azdl: `pulumi preview -s dev --policy-pack policy-pack
# --policy-pack-config out/dev-policy.json` (`azdl policy --pack-config dev` writes the config).
description: azdl guardrails (security, tags, deletion protection, GPU budget)
runtime:
  name: python
  options:
    virtualenv: ../.venv
""",
    "__main__.py": '''\
"""azdl's CrossGuard pack as the installed azdl ships it, run as Pulumi runs a pack (its
__main__.py, with its folder first on the import path)."""

import runpy
from pathlib import Path

import policies

runpy.run_path(str(Path(policies.__file__).parent), run_name="__main__")
''',
}


def project_file() -> str:
    """Pulumi.yaml: azdl's typed settings; the program is this folder's __main__.py."""
    import yaml

    from infra.config_schema import pulumi_project_config

    head = {
        # The stacks' settings are `azdl:<key>`: the program reads the project's namespace.
        "name": "azdl",
        "description": "Our training platform on Azure, built on azdl",
        "runtime": {"name": "python", "options": {"virtualenv": ".venv"}},
        "stackConfigDir": "stacks",
        "config": pulumi_project_config(),
    }
    return (
        "# Made by `azdl init`. The program is __main__.py; stack settings live in\n"
        "# stacks/Pulumi.<stack>.yaml (keys `azdl:<key>`, checked before anything is declared).\n"
        + yaml.safe_dump(head, sort_keys=False, width=100)
    )


def readme(pin: str) -> str:
    return f"""# Our training platform

Built on azdl ({pin}, pinned in requirements.txt). The program is `__main__.py`: azdl's
platform from the stack's settings (`stacks/`), then our own resources.

```bash
python3.11 -m venv .venv && .venv/bin/pip install -r requirements.txt
.venv/bin/azdl plan dev prod   # what each stack declares, offline
.venv/bin/azdl policy dev      # azdl's guardrails on that plan
```

`pulumi preview -s dev --policy-pack policy-pack` runs the same guardrails in Pulumi.

Upgrading azdl is bumping the pin: `azdl plan dev --out out/before` with the old version,
then `azdl diff out/before/dev.json dev` with the new one shows what the upgrade changes.
"""


def installed_pin() -> str:
    try:
        return f"azdl=={version('azdl')}"
    except PackageNotFoundError:
        raise AzdlError(
            "azdl is not installed here (no version to pin); install its wheel first"
        ) from None


def create(folder: Path) -> list[Path]:
    """Write the repository into `folder` (new or empty); the files written."""
    if folder.exists() and not folder.is_dir():
        raise AzdlError(f"azdl init {folder}: a file; expected a new or empty folder")
    if folder.is_dir() and any(folder.iterdir()):
        raise AzdlError(f"azdl init {folder}: not empty; expected a new or empty folder")
    pin = installed_pin()
    files = {
        "Pulumi.yaml": project_file(),
        "__main__.py": PROGRAM,
        "requirements.txt": f"{pin}\n",
        ".gitignore": GITIGNORE,
        ".amlignore": AMLIGNORE,
        "README.md": readme(pin),
        **{f"stacks/{name}": (SHIPPED_STACKS / name).read_text() for name in STACK_FILES},
        **{f"policy-pack/{name}": text for name, text in POLICY_PACK.items()},
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
