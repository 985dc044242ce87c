"""A resource operation that fails after Azure accepted it, as pulumi-azure-native reports it
and as the Pulumi engine then hands it to the resource's error hooks: the failed-operation path
the mock engine (tests/support/mock_engine) does not model yet. Written to be wired into it; the
tests of the image builds use it meanwhile (tests/infra/test_build_failure.py).

The provider (pulumi/pulumi-azure-native, commit 006a62afe453b416e5d5c98d2d91c4c7281f52f9):
- `putOrPatch` (provider/pkg/azure/client_azcore.go) polls a long-running PUT to its end; when
  the operation fails it returns the error with `created` true, worded by `newResponseError`
  as `Status=<http status> Code="<error.code>" Message="<error.message>"`
  (`PulumiAzcoreResponseError.Error`);
- `Create` (provider/pkg/provider/provider.go) hands an error with `created` to
  `HandleErrorWithCheckpoint` (provider/pkg/provider/crud/crud.go): it reads the resource back by
  its id and returns `ErrorResourceInitFailed` with that state (in v3 the outputs alone, no
  `__inputs`) and the error as its one reason: a partial failure;
- before any PUT, `CanCreate` (client_azcore.go) refuses a resource Azure already has:
  `cannot create already existing resource '<id>'`, a plain error.

The engine (pulumi/pulumi, commit e86e79ecab47e09abc4f1f3b5a9cdcf1e0feaa06,
pkg/resource/deploy/step.go `CreateStep.Apply`, retries.go `withRetries`, deployment.go
`RunErrorHooks`): on a failed create it puts the error in front of the earlier ones (newest
first), stops at 100 tries, and calls each of the resource's `on_error` hooks in turn through
the program's callback server (`pulumirpc.Callbacks/Invoke` with an `ErrorHookRequest`); it
tries again if any hook asks to. A partial failure records the resource with the state read
back and `InitErrors`; the step fails either way. (Before Pulumi CLI 3.244.0 the hooks saw
partial failures only: pulumi/pulumi#23347.)
"""

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import grpc
from google.protobuf import struct_pb2
from pulumi.runtime.proto import callback_pb2, callback_pb2_grpc, resource_pb2

MAX_ERROR_HOOK_RETRIES = 100  # retries.go, maxErrorHookRetries
T = TypeVar("T")


def operation_error(http_status: int, code: str, message: str) -> str:
    """The provider's words for a failed operation (PulumiAzcoreResponseError.Error)."""
    if not code:
        return f'Status={http_status} Message="{message}"'
    return f'Status={http_status} Code="{code}" Message="{message}"'


def already_exists(resource_id: str) -> str:
    """CanCreate's error for a resource Azure already has."""
    return f"cannot create already existing resource '{resource_id}'"


class OperationFailed(Exception):
    """A provider's failed create. `partial`: the resource was created and read back (then
    `resource_id` and `state` are what the engine records, with `str(self)` as its init error);
    else nothing was created."""

    def __init__(self, message: str, resource_id: str = "", state: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.resource_id, self.state = resource_id, dict(state or {})
        self.partial = bool(resource_id)


class ErrorHooks:
    """The error hooks a program registered, by name (`register` takes each
    RegisterErrorHookRequest the resource monitor receives), called as the engine calls them."""

    def __init__(self) -> None:
        self._callbacks: dict[str, Any] = {}

    def register(self, request: resource_pb2.RegisterErrorHookRequest) -> None:
        self._callbacks[request.name] = request.callback

    def run(self, names: list[str], request: resource_pb2.ErrorHookRequest) -> bool:
        """Call each hook named in `names` (a resource's `on_error`) with `request`; whether any
        asked to try again. A hook that is not registered, or that raised, is an error."""
        retry = False
        for name in names:
            if name not in self._callbacks:
                raise RuntimeError(f"error hook {name!r} was not registered")
            callback = self._callbacks[name]
            with grpc.insecure_channel(callback.target) as channel:
                answer = callback_pb2_grpc.CallbacksStub(channel).Invoke(
                    callback_pb2.CallbackInvokeRequest(
                        token=callback.token, request=request.SerializeToString()
                    )
                )
            response = resource_pb2.ErrorHookResponse.FromString(answer.response)
            if response.error:
                raise RuntimeError(f"error hook {name!r} failed: {response.error}")
            retry = retry or response.retry
        return retry


def hook_request(urn: str, name: str, typ: str, inputs: Mapping[str, Any], errors: list[str],
                 operation: str = "create") -> resource_pb2.ErrorHookRequest:  # fmt: skip
    """The ErrorHookRequest of a failed create (new inputs only: `RunErrorHooks`' arguments)."""
    new_inputs = struct_pb2.Struct()
    new_inputs.update(dict(inputs))
    return resource_pb2.ErrorHookRequest(
        urn=urn, name=name, type=typ, new_inputs=new_inputs, failed_operation=operation,
        errors=errors,
    )  # fmt: skip


def create_with_hooks(create: Callable[[], T], hooks: ErrorHooks, names: list[str], *, urn: str,
                      name: str, typ: str, inputs: Mapping[str, Any]) -> T:  # fmt: skip
    """`create()` as the engine runs a provider's Create: on OperationFailed the error hooks
    named `names` decide whether it is tried again; else the failure is raised."""
    failures: list[str] = []
    while True:
        try:
            return create()
        except OperationFailed as failed:
            failures.insert(0, str(failed))
            if len(failures) >= MAX_ERROR_HOOK_RETRIES:
                raise
            if not hooks.run(names, hook_request(urn, name, typ, inputs, failures)):
                raise
