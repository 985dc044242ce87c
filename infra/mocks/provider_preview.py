"""`PreviewMocks`: the Pulumi SDK's mocks answering as `pulumi preview` of a new stack does,
which is what `azdl plan` renders the program under: the invokes as Azure answers them, and each
resource as pulumi-azure-native's preview of a create gives it: no id, its outputs from its
inputs (docs/architecture.md, "The mocks").

The test engine (tests/support/mock_engine) answers its preview of a create with this very
class, so the tests that hold the preview to the provider's source hold `azdl plan` to it."""

import collections.abc
import functools
import importlib
import typing
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic.dynamic import PROVIDER_KEY
from pulumi.runtime import rpc

from infra.mocks.azure_answers import CLIENT_CONFIG, SUBSCRIPTION_ID, client_config

DYNAMIC = "pulumi-python:dynamic:Resource"  # a Python dynamic provider's resource
RANDOM_ID = "random:index/randomId:RandomId"


class PreviewMocks(pulumi.runtime.Mocks):
    """`pulumi preview` of a new stack, offline. `subscription_id`: the subscription
    `getClientConfig` answers with (the deploying identity's)."""

    def __init__(self, subscription_id: str = SUBSCRIPTION_ID) -> None:
        self.subscription_id = subscription_id

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == CLIENT_CONFIG:
            return dict(client_config(self.subscription_id)), []
        raise NotImplementedError(f"no Azure answer is mocked for the call {args.token}")

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if not args.custom:  # a component: nothing of its own reaches a provider
            return None, {}
        return None, create_preview(args.typ, args.inputs)


def create_preview(token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs of a resource of type `token` in the preview of its create; its id is
    unknown (pulumi-azure-native provider/pkg/provider/provider.go, `Create`, commit
    006a62afe453b416e5d5c98d2d91c4c7281f52f9, returns none in a preview). A RandomId's computed
    values are unknown until it is created; a dynamic resource shows its inputs (the dynamic
    provider does not support preview)."""
    if token.startswith("azure-native:"):
        return preview_outputs(token, inputs)
    if token == RANDOM_ID:
        return unsecret(dict(inputs))
    if token == DYNAMIC:
        return {k: unsecret(v) for k, v in inputs.items() if k != PROVIDER_KEY}
    raise NotImplementedError(f"no preview is mocked for the type {token}")


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
