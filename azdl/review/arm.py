"""Resource kinds as Azure knows them, whichever Pulumi resource declares them: a typed one or
the generic ARM resource (the stacks declare the registry that way: infra/registry.py)."""

from typing import Any

from infra.azure_facts import ARM_TYPES, GENERIC_RESOURCE, REGISTRY, UNKNOWN, lookup


def _get(props: Any, key: str) -> Any:
    """`props[key]`; None where absent or unknown until deploy."""
    found = lookup(props, key)
    return None if found is UNKNOWN else found


def arm_type(resource_type: str, props: Any) -> str | None:
    """`Microsoft.<Provider>/<type>` of a typed resource in ARM_TYPES or a generic ARM resource."""
    if resource_type in ARM_TYPES:
        return ARM_TYPES[resource_type]
    if resource_type == GENERIC_RESOURCE:
        namespace, kind = _get(props, "resourceProviderNamespace"), _get(props, "resourceType")
        if isinstance(namespace, str) and isinstance(kind, str):
            return f"{namespace}/{kind}"
    return None


def is_registry(resource_type: str, props: Any) -> bool:
    return arm_type(resource_type, props) == ARM_TYPES[REGISTRY]


def arm_properties(resource_type: str, props: Any) -> Any:
    """The ARM `properties` of a registry-like resource: nested for the generic form."""
    return _get(props, "properties") if resource_type == GENERIC_RESOURCE else props


def arm_name(resource_type: str, props: Any, typed_key: str) -> Any:
    """The resource's Azure name: `resourceName` for the generic form, `typed_key` otherwise."""
    return _get(props, "resourceName" if resource_type == GENERIC_RESOURCE else typed_key)
