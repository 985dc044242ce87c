"""Loading a stack's settings: from Pulumi's keys or a stack file to one `StackConfig`, with
every problem as one `ConfigError`."""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from infra.config.fields import PROJECT, ConfigError, Invalid, Missing
from infra.config.stack import StackConfig

# The azure-native provider's own region key: a Pulumi habit, but azdl reads azdl:location.
PROVIDER_LOCATION_KEY = "azure-native:location"


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{PROJECT}:{key} = {value!r} is invalid: {allowed}")


# ---- the settings as Pulumi and the stack files name them -----------------------------------
def json_type(schema: Mapping[str, Any]) -> str | None:
    """A property's JSON type ("string", "object", ...; a nullable one's non-null type)."""
    types = [s.get("type") for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    return "object" if not types or types[0] is None else types[0]


SCHEMA = StackConfig.model_json_schema(by_alias=True)
KEYS = tuple(f.alias for f in StackConfig.model_fields.values())
# Passed by Pulumi as they are; every other key holds YAML/JSON structure.
STRING_KEYS = tuple(k for k in KEYS if json_type(SCHEMA["properties"][k]) == "string")
OBJECT_KEYS = tuple(k for k in KEYS if k not in STRING_KEYS)


def _key_of(loc: tuple[Any, ...], at: str = "") -> str:
    key = ""
    for part in (*loc, *([at] if at else [])):
        part = f"[{part}]" if isinstance(part, int) else str(part)
        key += part if not key or part.startswith("[") else f".{part}"
    return key


TYPE_WORDS = {"string_type": "a string", "int_type": "an integer", "float_type": "a number",
              "bool_type": "true or false", "tuple_type": "a list", "list_type": "a list",
              "dict_type": "an object"}  # fmt: skip


def config_error(exc: ValidationError) -> ConfigError:
    """The first problem pydantic found, in the project's words."""
    error = exc.errors()[0]
    key, cause = _key_of(error["loc"]), error.get("ctx", {}).get("error")
    if isinstance(cause, Invalid):
        return _fail(_key_of(error["loc"], cause.at), cause.value, cause.allowed)
    if isinstance(cause, Missing):
        key = _key_of(error["loc"], cause.at)
        return ConfigError(f"{PROJECT}:{key} is required but missing{cause.note}")
    if error["type"] == "missing":
        return ConfigError(f"{PROJECT}:{key} is required but missing")
    if error["type"] in TYPE_WORDS:
        return _fail(key, error["input"], f"must be {TYPE_WORDS[error['type']]}")
    return _fail(key, error["input"], error["msg"])  # a check without words of its own


def load_config(
    values: Mapping[str, Any],
    *,
    stack: str,
    project: str = PROJECT,
    subscription_id: str | None = None,
) -> StackConfig:
    """Validate a stack's settings. Keys may carry the `azdl:` namespace (as in stack files);
    keys of other namespaces are ignored, except that `azure-native:location` must not stand
    in for, or contradict, `azdl:location`.

    `subscription_id` is the subscription the stack deploys to (the program reads it from
    Azure): the global names' suffix derives from it. Without it (validating a stack file
    offline) the suffix is a placeholder of the same length; see `with_subscription`."""
    own = {}
    for key, value in values.items():
        namespace, _, bare = key.rpartition(":")
        if namespace in ("", project):
            own[bare] = value
    provider_location = values.get(PROVIDER_LOCATION_KEY)
    if provider_location is not None and "location" not in own:
        raise ConfigError(
            f"{PROJECT}:location is required but missing; the stack sets {PROVIDER_LOCATION_KEY} "
            f"= {provider_location!r}, the azure-native provider's default region, which azdl "
            f"does not read: set {PROJECT}:location: {provider_location} instead "
            f"(`pulumi config set {PROJECT}:location {provider_location}`)"
        )
    if provider_location is not None and provider_location != own["location"]:
        raise _fail(
            "location",
            own["location"],
            f"the same region as {PROVIDER_LOCATION_KEY} ({provider_location!r}), or remove "
            f"{PROVIDER_LOCATION_KEY}: azdl creates every resource in {PROJECT}:location",
        )
    for key in sorted(own):
        section, dot, _ = key.partition(".")
        if dot and section in OBJECT_KEYS:
            raise _fail(
                key,
                own[key],
                f"a flat key; {section} is an object, so set its sub-keys with --path: "
                f"`pulumi config set --path '{PROJECT}:{key}' <value>` (and remove the flat "
                f"`{PROJECT}:{key}` with `pulumi config rm '{PROJECT}:{key}'`)",
            )
    context = {"project": project, "stack": stack, "subscription_id": subscription_id,
               "environment": own.get("environment")}  # fmt: skip
    try:
        return StackConfig.model_validate(own, context=context)
    except ValidationError as exc:
        raise config_error(exc) from None


def with_subscription(cfg: StackConfig, subscription_id: str) -> StackConfig:
    """`cfg` for the subscription it deploys to: the global names get their final suffix."""
    copy = cfg.model_copy()
    copy._subscription_id = subscription_id
    copy._names = copy._derive_names()
    return copy


def stack_name_of(path: Path) -> str:
    """`stacks/Pulumi.dev.yaml` -> `dev`."""
    match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
    if not match:
        raise ConfigError(f"{path}: a stack file is named Pulumi.<stack>.yaml")
    return match.group(1)


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `config:` mapping of a Pulumi stack file."""
    document = yaml.safe_load(Path(path).read_text()) or {}
    config = document.get("config", {})
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path}: `config:` must be a mapping of keys to values")
    return dict(config)


def load_stack_file(path: Path, subscription_id: str | None = None) -> StackConfig:
    """Validate `stacks/Pulumi.<stack>.yaml` without Pulumi (names for `subscription_id`)."""
    path = Path(path)
    return load_config(
        read_stack_file(path), stack=stack_name_of(path), subscription_id=subscription_id
    )
