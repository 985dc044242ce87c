"""What pulumi-azure-native answers in a preview: the outputs of a resource, from its inputs
(docs/architecture.md, "The mocks")."""

import collections.abc
import functools
import importlib
import typing
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.runtime import rpc

# Outputs the provider keeps from the old state in the preview of an update
# (provider/pkg/provider/provider.go, `Update`, "stableOutputs"; commit 006a62af).
STABLE_OUTPUTS = ("name", "location")


def preview_outputs(token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What pulumi-azure-native's preview answers for a resource of type `token` with `inputs`
    (provider/pkg/convert/previewOutputs.go, `PreviewOutputs`, pulumi/pulumi-azure-native
    commit 604cfd525f965477da629fdb2474063bdce7d798): its schema's output properties, each the
    input of the same name shaped by the property's type, or unknown."""
    return _preview_object(_output_types(token), unsecret(inputs))


@functools.cache
def _output_types(token: str) -> dict[str, Any]:
    """The output properties of an azure-native resource type and their types, from the
    Python SDK's generated resource class (generated from the provider's schema; camelCase
    names, as on the wire)."""
    _, module, cls = token.split(":")
    sdk = importlib.import_module(f"pulumi_azure_native.{module}")
    return pulumi._types.resource_types(getattr(sdk, cls))


def _preview_object(props: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: _preview_value(inputs[name], typ) if name in inputs else pulumi.UNKNOWN
        for name, typ in props.items()
    }


def _preview_value(value: Any, typ: Any) -> Any:
    """`previewOutputValue`: a known input of the property's type passes, an object is filled
    property by property, an Any (or oneOf) property takes the input as it is; else unknown."""
    typ = pulumi._types.unwrap_optional_type(typ)
    if isinstance(value, pulumi.output.Unknown) or value == rpc.UNKNOWN:
        return pulumi.UNKNOWN
    if typ is Any:
        return value
    if typ is bool:
        return value if isinstance(value, bool) else pulumi.UNKNOWN
    if typ in (int, float):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return value if number else pulumi.UNKNOWN
    if typ is str:
        return value if isinstance(value, str) else pulumi.UNKNOWN
    origin, params = typing.get_origin(typ), typing.get_args(typ)
    if origin in (list, collections.abc.Sequence) and isinstance(value, list):
        return [_preview_value(v, params[0]) for v in value]
    if origin in (dict, collections.abc.Mapping) and isinstance(value, dict):
        return {k: _preview_value(v, params[1]) for k, v in value.items()}
    if pulumi._types.is_output_type(typ) and isinstance(value, dict):
        return _preview_object(pulumi._types.output_type_types(typ), value)
    return pulumi.UNKNOWN


def unsecret(value: Any) -> Any:
    """A mock input as a provider receives it: a secret's plain value, at any depth."""
    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return unsecret(value["value"])
    if isinstance(value, dict):
        return {k: unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsecret(v) for v in value]
    return value
