"""What the settings' one declaration (infra/config/) gives editors, Pulumi and docs: the stack
files' JSON Schema (`stack_file_schema`), Pulumi.yaml's typed `config:` (`pulumi_project_config`)
and docs/configuration.md's rows (`reference_rows`). `python -m infra.config_schema` rewrites
the first two; tests/infra/test_config_schema.py fails while either differs."""

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from infra.config import PROJECT, SCHEMA, json_type

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "stacks" / "azdl.schema.json"
PROJECT_FILE = ROOT / "Pulumi.yaml"
REGENERATE = "python -m infra.config_schema"
SOURCE = "infra/config/"  # the models
TYPE_NAMES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
              "array": "list", "object": "dict"}  # fmt: skip
# Pulumi.yaml declares only what Pulumi can check as we do: its types are string, integer,
# boolean and array (of those), so objects (network, cluster, ...) and numbers
# (maxGpuSpendPerHourUsd) cannot be declared; a key declared without a default is one Pulumi
# requires, so an optional key whose default is derived (nameSuffix) cannot be either.
# (pulumi.com/docs/iac/concepts/projects/project-file/, "config options", 2026-11.)
PULUMI_TYPES = ("string", "integer", "boolean")


class Row(NamedTuple):
    path: str  # dotted, without the namespace: "cluster.maxNodes"; list items "operators[].name"
    type: str  # str, int, float, bool, list or dict
    default: str  # in words or as JSON; "**required**"
    allowed: str
    doc: str
    example: Any  # a value for `pulumi config set` lines, or None


def _resolve(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A property's own schema: its `$ref` followed, a nullable one's non-null branch."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") != "null":
            prop = {**prop, **branch}
            break
    if "$ref" in prop:
        prop = {**root["$defs"][prop["$ref"].rsplit("/", 1)[1]], **prop}
    return prop


def _is_model(prop: dict[str, Any]) -> bool:
    return any("$ref" in branch for branch in prop.get("anyOf", [prop]))


def reference_rows(
    schema: dict[str, Any] = SCHEMA, prefix: str = "", root: dict[str, Any] | None = None
) -> Iterator[Row]:
    """One row per key of `schema` (a model's JSON schema; `root` holds its `$defs`)."""
    root = root or schema
    required = set(schema.get("required", ()))
    for key, prop in schema["properties"].items():
        own = _resolve(prop, root)
        kind = json_type(prop)
        if "x-default" in prop:
            default = prop["x-default"]
        elif key in required:
            default = "**required**"
        else:
            default = f"`{json.dumps(prop.get('default'))}`"
        allowed = ", ".join(f"`{a}`" for a in own["enum"]) if "enum" in own else ""
        source = f" ([source]({prop['x-source']}))" if "x-source" in prop else ""
        example = prop.get(
            "x-example", None if "x-default" in prop or key in required else prop.get("default")
        )
        path = prefix + key
        yield Row(path, TYPE_NAMES[kind], default, prop.get("x-allowed", allowed),
                  " ".join(own.get("description", "").split()) + source, example)  # fmt: skip
        if _is_model(prop):
            yield from reference_rows(own, path + ".", root)
        if kind == "array" and _is_model(own["items"]):
            yield from reference_rows(_resolve(own["items"], root), path + "[].", root)


def _clean(node: Any) -> Any:
    """The schema without pydantic's placeholders: a `null` default where the real one is
    derived (`x-default` says how) and pydantic's titles."""
    if isinstance(node, dict):
        out = {k: _clean(v) for k, v in node.items() if k != "title"}
        if "x-default" in out and out.get("default", 0) is None:
            del out["default"]
        return out
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def stack_file_schema() -> dict[str, Any]:
    """A Pulumi stack file: `config:` maps `azdl:<key>` to the settings; other namespaces'
    keys (`azure-native:...`, `pulumi:...`) pass, an unknown `azdl:` key does not."""
    schema = _clean(SCHEMA)
    settings = {f"{PROJECT}:{k}": v for k, v in schema["properties"].items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": f"Generated from {SOURCE} by `{REGENERATE}`; do not edit.",
        "title": f"{PROJECT} Pulumi stack file (stacks/Pulumi.<stack>.yaml)",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": settings,
                "required": [f"{PROJECT}:{k}" for k in schema["required"]],
                "patternProperties": {f"^(?!{PROJECT}:)": {}},
                "additionalProperties": False,
            },
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
        },
        "$defs": schema["$defs"],
    }


def pulumi_project_config() -> dict[str, Any]:
    """Pulumi.yaml's `config:` section: the top-level keys Pulumi can type-check."""
    declared = {}
    for key, prop in SCHEMA["properties"].items():
        kind = json_type(prop)
        fixed = "default" in prop and "x-default" not in prop
        if kind not in PULUMI_TYPES or not (fixed or key in SCHEMA["required"]):
            continue
        declared[key] = {"type": kind, "description": prop["description"]}
        if fixed:
            declared[key]["default"] = prop["default"]
    return declared


def project_file_text() -> str:
    """Pulumi.yaml with its `config:` section (the file's last) as the models declare it."""
    text = PROJECT_FILE.read_text().split("\n# Generated from ", 1)[0]
    head = text.split("\nconfig:", 1)[0].rstrip("\n")
    section = yaml.safe_dump({"config": pulumi_project_config()}, sort_keys=False, width=100)
    return f"{head}\n# Generated from {SOURCE} by `{REGENERATE}`.\n{section}"


def schema_text() -> str:
    return json.dumps(stack_file_schema(), indent=2) + "\n"


def main() -> int:
    SCHEMA_FILE.write_text(schema_text())
    PROJECT_FILE.write_text(project_file_text())
    print(f"wrote {SCHEMA_FILE.relative_to(ROOT)} and {PROJECT_FILE.relative_to(ROOT)}'s config")
    return 0


if __name__ == "__main__":
    sys.exit(main())
