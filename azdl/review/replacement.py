"""Which property changes force Azure to replace a resource instead of updating it in place:
the inputs of its ARM id, the properties in `replacements.yaml`, and its own
`replaceOnChanges` option."""

import inspect
from functools import cache
from importlib import import_module
from pathlib import Path

import yaml

REPLACEMENTS_FILE = Path(__file__).with_name("replacements.yaml")
# Query options of the SDK's lookups that are resource inputs but no part of the ARM id.
_QUERY_OPTIONS = {"expand", "opts"}


@cache
def replacement_paths() -> dict[str, tuple[str, ...]]:
    raw = yaml.safe_load(REPLACEMENTS_FILE.read_text())
    return {k: tuple(v) for k, v in raw.items()}


def _camel(snake: str) -> str:
    first, *rest = snake.split("_")
    return first + "".join(w.title() for w in rest)


@cache
def arm_id_inputs(resource_type: str) -> tuple[str, ...]:
    """The inputs that make up an azure-native resource's ARM id (its Azure name, its parents'
    names, resource group, scope): changing one means another resource, so a replacement.
    They are the parameters of the SDK's own lookup (`get_<resource>`: the GET on the id)
    that are also inputs of the resource; () for anything else."""
    package, _, rest = resource_type.partition(":")
    module, _, name = rest.partition(":")
    if package != "azure-native" or not module or not name:
        return ()
    try:
        cls = getattr(import_module(f"pulumi_azure_native.{module}"), name)
        leaf = cls.__module__.rsplit(".", 1)[-1]
        getter = getattr(
            import_module(f"{cls.__module__.rsplit('.', 1)[0]}.get_{leaf}"), f"get_{leaf}"
        )
    except (ImportError, AttributeError):
        return ()
    inputs = set(inspect.signature(cls._internal_init).parameters)
    return tuple(
        _camel(p)
        for p in inspect.signature(getter).parameters
        if p in inputs and p not in _QUERY_OPTIONS
    )


def covers(listed: str, path: str) -> bool:
    """Whether an option's entry (`*`, a property path, or one above it) covers `path`."""
    return listed == "*" or path == listed or path.startswith((f"{listed}.", f"{listed}["))


def forces_replacement(resource_type: str, path: str, declared: tuple[str, ...] = ()) -> bool:
    """Whether changing `path` replaces the resource: an input of its ARM id
    (`arm_id_inputs`), a property listed in replacements.yaml, or one of the resource's own
    `replaceOnChanges` option (`declared`)."""
    table = replacement_paths()
    listed = table.get("*", ()) + table.get(resource_type, ()) + arm_id_inputs(resource_type)
    return any(covers(entry, path) for entry in listed + tuple(declared))
