"""Render one stack offline: run the real infra program under the Pulumi SDK's mocks, as a
`pulumi preview` of a new stack would (`infra.mocks.PreviewMocks`, the preview the tests hold to
pulumi-azure-native's source), and record what it declares. `azdl.review.plan` runs it
in a fresh interpreter (`python -m azdl.review.render_cache`), because the Pulumi runtime's
state is global."""

import functools
import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.sync_await import _sync_await

from azdl import project
from azdl.review import manifest
from infra.azure_facts import ENGINE_UNKNOWN
from infra.config import PROJECT, read_stack_file, stack_name_of
from infra.mocks import PreviewMocks

_ASSET_SIGS = {rpc._special_asset_sig, rpc._special_archive_sig}


def plain(value: Any, sources: list[str]) -> Any:
    """An engine value as manifest JSON: unknowns marked (from `sources`), secrets redacted,
    resource references as keys, paths inside the project made relative."""
    if value == ENGINE_UNKNOWN:
        return manifest.unknown(sources)
    if isinstance(value, str):
        root = _project_prefix()
        return "./" + value[len(root) :] if value.startswith(root) else value
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire format has only doubles; Azure's integers stay integers
    if isinstance(value, list):
        return [plain(v, sources) for v in value]
    if isinstance(value, dict):
        sig = value.get(rpc._special_sig_key)  # the engine's special values: signature key
        if sig == rpc._special_secret_sig:
            return manifest.SECRET
        if sig == rpc._special_resource_sig:
            return {"$ref": manifest.key_of_urn(value.get("urn", ""))}
        if sig in _ASSET_SIGS:
            return {"$asset": plain(value.get("path") or value.get("uri") or "", sources)}
        return {k: plain(v, sources) for k, v in value.items()}
    return value


@functools.cache
def _project_prefix() -> str:
    return f"{project.root()}/"


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A MockMonitor that keeps every registration request and answers like a preview."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.requests: list[tuple[str, Any]] = []

    def RegisterResource(self, request):
        if request.type != manifest.STACK_TYPE:
            urn = self.make_urn(request.parent, request.type, request.name)
            self.requests.append((urn, request))
        return super().RegisterResource(request)


# A dynamic resource's serialized provider (its pickled code): named, not shown.
DYNAMIC_PROVIDER = "__provider"


def resource_entry(urn: str, request) -> dict[str, Any]:
    inputs = json_format.MessageToDict(request.object)
    if DYNAMIC_PROVIDER in inputs:
        inputs[DYNAMIC_PROVIDER] = "<serialized Python dynamic provider>"
    deps = sorted({manifest.key_of_urn(u) for u in request.dependencies})
    prop_deps = {
        k: sorted({manifest.key_of_urn(u) for u in v.urns})
        for k, v in request.propertyDependencies.items()
    }
    parent = manifest.key_of_urn(request.parent)
    return {
        "key": manifest.key_of_urn(urn),
        "type": request.type,
        "name": request.name,
        "custom": bool(request.custom),
        "parent": None if parent.startswith(manifest.STACK_TYPE + "::") else parent or None,
        "dependsOn": deps,
        "protect": bool(request.protect),
        "retainOnDelete": bool(request.retainOnDelete),
        "ignoreChanges": sorted(request.ignoreChanges),
        "replaceOnChanges": sorted(request.replaceOnChanges),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        "inputs": {k: plain(v, prop_deps.get(k) or deps) for k, v in sorted(inputs.items())},
    }


def _stack_output(output: pulumi.Output) -> Any:
    if _sync_await(output.is_secret()):
        return manifest.SECRET
    if not _sync_await(output.is_known()):
        sources = [_sync_await(r.urn.future()) for r in _sync_await(output.resources())]
        return manifest.unknown(manifest.key_of_urn(u) for u in sources)
    value = _sync_await(output.future())
    return _known_output(value)


def _known_output(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        return _stack_output(value)
    if isinstance(value, dict):
        return {str(k): _known_output(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_known_output(v) for v in value]
    return plain(value, [])


def redact_config(config: dict[str, Any]) -> dict[str, Any]:
    """The stack's own settings, with Pulumi secrets (`{secure: ...}`) redacted."""

    def redact(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"secure"}:
                return manifest.SECRET
            return {k: redact(v) for k, v in value.items()}
        if isinstance(value, list):
            return [redact(v) for v in value]
        return value

    return {k: redact(v) for k, v in sorted(config.items())}


def render(stack_file: Path, program: Path) -> dict[str, Any]:
    """Run `program` (a folder with __main__.py, or a file) for `stack_file` under mocks, as
    Pulumi's Python host runs it (`runpy.run_path(program, run_name="__main__")`,
    pulumi-language-python-exec); the manifest. Once per interpreter."""
    stack = stack_name_of(stack_file)
    config = read_stack_file(stack_file)
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    )
    mocks = PreviewMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=True, monitor=monitor)
    pulumi_mocks.test(lambda: runpy.run_path(str(program), run_name="__main__"))()
    outputs = {k: _known_output(v) for k, v in get_root_resource().outputs.items()}
    resources = sorted((resource_entry(u, r) for u, r in monitor.requests), key=lambda r: r["key"])
    return {
        "format": manifest.FORMAT,
        "project": PROJECT,
        "stack": stack,
        "config": redact_config(config),
        "resources": resources,
        "outputs": dict(sorted(outputs.items())),
    }
