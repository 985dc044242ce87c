"""The plan manifest (`azdl.plan/v1`): a stack's declared resources as one deterministic JSON
document. Its fields: docs/architecture.md ("Review: plan, diff, cost")."""

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from azdl.errors import AzdlError
from infra.azure_facts import UNKNOWN_KEY

FORMAT = "azdl.plan/v1"
SECRET = "[secret]"
STACK_TYPE = "pulumi:pulumi:Stack"
_REQUIRED = ("format", "project", "stack", "config", "resources", "outputs")


def unknown(sources: Iterable[str]) -> dict[str, list[str]]:
    """The marker for a value known only after deployment, derived from `sources` (keys)."""
    return {UNKNOWN_KEY: sorted(set(sources))}


def is_unknown(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {UNKNOWN_KEY}


def sources(value: dict[str, list[str]]) -> list[str]:
    """The keys of the resources an unknown value comes from."""
    return value[UNKNOWN_KEY]


def key_of_urn(urn: str) -> str:
    """`urn:pulumi:dev::azdl::pulumi:pulumi:Stack$azure-native:x:Y::n` -> `azure-native:x:Y::n`."""
    if not urn:
        return ""
    parts = urn.split("::")
    if len(parts) < 4 or not parts[0].startswith("urn:pulumi:"):
        raise ValueError(f"not a Pulumi URN: {urn!r}")
    qualified_type, name = parts[2], "::".join(parts[3:])
    root = STACK_TYPE + "$"
    if qualified_type.startswith(root):
        qualified_type = qualified_type[len(root) :]
    return f"{qualified_type}::{name}"


def dumps(manifest: dict[str, Any]) -> str:
    """Canonical JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def validate(manifest: Any, origin: str) -> dict[str, Any]:
    """Check that `manifest` is a plan of this format version; return it."""
    if not isinstance(manifest, dict):
        raise AzdlError(f"{origin}: not a plan manifest (expected a JSON object)")
    found = manifest.get("format")
    if found != FORMAT:
        raise AzdlError(
            f"{origin}: manifest format {found!r} is not supported; this azdl reads {FORMAT!r} "
            "(render both sides with the same azdl version: `azdl plan STACK` writes "
            "out/plan/STACK.json)"
        )
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise AzdlError(f"{origin}: manifest lacks {', '.join(missing)}")
    if not isinstance(manifest["resources"], list) or not all(
        isinstance(r, dict) and {"key", "type", "name", "inputs"} <= set(r)
        for r in manifest["resources"]
    ):
        raise AzdlError(
            f"{origin}: `resources` must be a list of objects with key/type/name/inputs"
        )
    return manifest


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a manifest file."""
    path = Path(path)
    if path.is_dir():
        raise AzdlError(
            f"{path} is a folder; expected a plan manifest file (a stack's .json in the folder "
            "`azdl plan --out` writes), or a stack name"
        )
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise AzdlError(f"{path}: no such manifest file") from None
    except json.JSONDecodeError as exc:
        raise AzdlError(f"{path}: not valid JSON ({exc})") from None
    return validate(document, str(path))


def by_key(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in manifest["resources"]}
