"""The tags every taggable resource carries."""

from collections.abc import Iterator
from functools import cache
from importlib import import_module

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, Severity

from infra.azure_facts import REQUIRED_TAGS, UNKNOWN, lookup

from .pack import resource_policy


@cache
def is_taggable(resource_type: str) -> bool:
    """Whether the azure-native resource type has `tags` (read from the SDK's own class)."""
    package, _, rest = resource_type.partition(":")
    module, _, name = rest.partition(":")
    if package != "azure-native" or not module or not name:
        return False
    try:
        cls = getattr(import_module(f"pulumi_azure_native.{module}"), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(getattr(cls, "tags", None), property)


@resource_policy(
    name="required-tags",
    description="Every taggable resource carries environment, project, owner and costCenter.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation=(
        "add the missing keys to azdl:tags in the stack file (the program tags every resource)"
    ),
    applies_to=lambda resource_type, _props: is_taggable(resource_type),
)
def _required_tags(args: ResourceValidationArgs) -> Iterator[str]:
    tags = lookup(args.props, "tags", default={})
    if tags is UNKNOWN:
        return
    missing = [
        t for t in REQUIRED_TAGS if not isinstance(lookup(tags, t), str) or not lookup(tags, t)
    ]
    if missing:
        kind = args.resource_type.split(":")[-1]
        yield f"{kind} '{args.name}' lacks the tags {', '.join(missing)}"
