"""Resource kinds as Azure knows them, whichever Pulumi resource declares them.

The stacks declare the container registry through azure-native's generic ARM resource
(`resources.Resource`, at an API version the typed one lacks: infra/registry.py), so checks
that look for a registry ask `kind(...)` rather than compare type tokens; `arm_properties`
gives the ARM `properties` of either form (the typed form carries them at the top level).
"""

from collections.abc import Mapping
from typing import Any

from pulumi_policy.proxy import UnknownValueError

GENERIC = "azure-native:resources:Resource"
REGISTRY = "azure-native:containerregistry:Registry"
# Typed token -> the ARM type it declares.
TYPED = {REGISTRY: "Microsoft.ContainerRegistry/registries"}


def _get(props: Any, key: str) -> Any:
    """`props[key]`; None where absent or unknown until deploy."""
    if not isinstance(props, Mapping):
        return None
    try:
        return props.get(key)
    except UnknownValueError:  # pulumi-policy's proxy for a value known only after deploy
        return None


def arm_type(resource_type: str, props: Any) -> str | None:
    """`Microsoft.<Provider>/<type>` of a typed resource in TYPED or a generic ARM resource."""
    if resource_type in TYPED:
        return TYPED[resource_type]
    if resource_type == GENERIC:
        namespace, kind = _get(props, "resourceProviderNamespace"), _get(props, "resourceType")
        if isinstance(namespace, str) and isinstance(kind, str):
            return f"{namespace}/{kind}"
    return None


def is_registry(resource_type: str, props: Any) -> bool:
    return arm_type(resource_type, props) == TYPED[REGISTRY]


def arm_properties(resource_type: str, props: Any) -> Any:
    """The ARM `properties` of a registry-like resource: nested for the generic form."""
    return _get(props, "properties") if resource_type == GENERIC else props


def arm_name(resource_type: str, props: Any, typed_key: str) -> Any:
    """The resource's Azure name: `resourceName` for the generic form, `typed_key` otherwise."""
    return _get(props, "resourceName" if resource_type == GENERIC else typed_key)
