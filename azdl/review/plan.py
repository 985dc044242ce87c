"""Find a stack, check its file (before the Pulumi runtime starts), and render it offline in a
fresh interpreter, or reuse the plan last rendered from the same inputs (`render_cache`)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from azdl import project
from azdl.errors import AzdlError
from azdl.review import manifest, render_cache


def known_stacks(stacks_dir: Path | None = None) -> list[str]:
    """The stacks in `stacks_dir` (default: the project's)."""
    stacks_dir = stacks_dir or project.stacks_dir()
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    """The file of `stack`, in `stacks_dir` (default: the project's)."""
    stacks_dir = stacks_dir or project.stacks_dir()
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(known_stacks(stacks_dir)) or "none"
        raise AzdlError(f"unknown stack {stack!r}; known stacks ({stacks_dir}): {known}")
    return path


def check_stack_file(path: Path) -> None:
    """A clear error for a malformed stack file or an invalid config, before rendering."""
    import yaml

    from infra.config import ConfigError, load_stack_file  # pydantic: only where a file is read

    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise AzdlError(f"{path}: malformed stack file (not valid YAML): {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
        raise AzdlError(f"{path}: malformed stack file: expected a mapping with a `config:` map")
    try:
        load_stack_file(path)
    except ConfigError as exc:
        raise AzdlError(f"{path}: invalid stack config: {exc}") from None


def render_stack(
    stack: str, stacks_dir: Path | None = None, reuse: bool = False
) -> tuple[dict[str, Any], float]:
    """The manifest of `stack` and the seconds it took (subprocess included). Every render is
    kept with its inputs; with `reuse`, one from unchanged inputs is handed back instead of
    rendering again. The program is the project's (Pulumi.yaml's `main`), as `pulumi preview`
    runs it, in the project's folder."""
    path = stack_file(stack, stacks_dir)
    cache_dir = render_cache.cache_dir()
    check_stack_file(path)
    started = time.perf_counter()
    if reuse and (kept := render_cache.lookup(path, cache_dir)) is not None:
        return manifest.validate(kept, f"kept plan of {stack}"), time.perf_counter() - started
    # Made before the render: a folder the render lists (the project's, by the import system)
    # would otherwise change under the inputs it recorded.
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="azdl-render-") as tmp:
        inputs_file = Path(tmp) / "inputs.json"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "azdl.review.render_cache",
                str(path),
                str(inputs_file),
                str(project.program()),
            ],
            cwd=project.root(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        seconds = time.perf_counter() - started
        if result.returncode == render_cache.CONFIG_ERROR_EXIT:
            raise AzdlError(f"{path}: invalid stack config: {result.stderr.strip()}")
        if result.returncode != 0:
            tail = "\n".join(result.stderr.strip().splitlines()[-15:])
            raise AzdlError(f"rendering stack {stack!r} failed (the program raised):\n{tail}")
        doc = manifest.validate(json.loads(result.stdout), f"plan of {stack}")
        render_cache.store(path, json.loads(inputs_file.read_text()), doc, cache_dir)
    return doc, seconds


def _is_file_ref(ref: str) -> bool:
    """A manifest file by its form (`*.json`, or a path with a folder in it), never because a
    file of that name happens to be in the working directory: `dev` is always a stack."""
    return ref.endswith(".json") or "/" in ref or (os.altsep is not None and os.altsep in ref)


def load_plans(refs: list[str], stacks_dir: Path | None = None) -> list[dict[str, Any]]:
    """Manifests from files (`*.json` or a path such as `out/plan/dev`) or from stack names,
    rendered or reused from unchanged inputs; every stack name is checked before the first one
    renders."""
    for ref in refs:
        if not _is_file_ref(ref):
            check_stack_file(stack_file(ref, stacks_dir))
    return [
        manifest.load(ref) if _is_file_ref(ref) else render_stack(ref, stacks_dir, reuse=True)[0]
        for ref in refs
    ]
