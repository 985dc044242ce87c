"""`render`: the whole program run for one stack under `AzureMocks`, and every resource it
declared recorded as the engine sees it."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from infra.config import PROJECT, read_stack_file, stack_name_of
from infra.mocks import SUBSCRIPTION_ID
from tests.support.mock_engine.engine import UPDATE, AzureMocks, RecordedResource


@dataclass
class Rendering:
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any]

    def of_type(self, token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == token]

    def get(self, token: str, name: str) -> RecordedResource:
        matches = [r for r in self.resources if r.type == token and r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources of type {token} named {name!r}")
        return matches[0]

    def state(self) -> dict[tuple[str, str], RecordedResource]:
        """The Pulumi state this rendering leaves (custom resources by type and name)."""
        return {(r.type, r.name): r for r in self.resources if r.custom}


class _RecordingMonitor(MockMonitor):
    """Adds what only the engine sees (URN, parent, protect, retainOnDelete, replaceWith,
    timeouts, hooks) to each record."""

    def RegisterResource(self, request):
        self.mocks._local.last = None
        self.mocks._local.urn = self.make_urn(request.parent, request.type, request.name)
        self.mocks._local.replace_on_changes = list(request.replaceOnChanges)
        response = super().RegisterResource(request)
        record = getattr(self.mocks._local, "last", None)
        if record is not None:
            record.urn, record.parent = response.urn, request.parent
            record.protect, record.retain_on_delete = request.protect, request.retainOnDelete
            record.delete_before_replace = request.deleteBeforeReplace
            record.dependencies = sorted(
                {*request.dependencies}
                | {u for deps in request.propertyDependencies.values() for u in deps.urns}
            )
            record.replace_with = sorted(request.replace_with)
            record.replace_on_changes = sorted(request.replaceOnChanges)
            timeouts = request.customTimeouts
            record.custom_timeouts = {
                k: v
                for k, v in (("create", timeouts.create), ("update", timeouts.update),
                             ("delete", timeouts.delete))
                if v
            }  # fmt: skip
            record.error_hooks = list(request.hooks.on_error)
        return response


def render(
    config: Mapping[str, Any],
    stack: str,
    project: str = PROJECT,
    mode: str = UPDATE,
    subscription_id: str = SUBSCRIPTION_ID,
    upload_endpoint: str | None = None,
    mocks: "AzureMocks | None" = None,
    state: Mapping[tuple[str, str], RecordedResource] | None = None,
) -> Rendering:
    """Run the program for `stack` with `config` (keys with or without `azdl:`; values as in a
    stack file) under mocks. Raises `infra.config.ConfigError` for invalid config.

    `mode=UPDATE` runs it as `pulumi up` does: the dynamic resources' code runs, so each
    image's build context is uploaded to `upload_endpoint` (where the mocked
    `listBuildSourceUploadUrl` points; by default the local SourceStore). PREVIEW_CREATE and
    PREVIEW_UPDATE run it as `pulumi preview` does (docs/architecture.md, "The mocks"):
    nothing is uploaded or built, and nothing leaves this machine. `state`: the Pulumi state of
    an earlier `up` (`Rendering.state()`). `subscription_id` is the subscription Azure answers
    with; the global names derive from it. `mocks` replaces the default AzureMocks (e.g. one
    that models a subscription across deployments).
    """
    from infra import program  # imported here: it pulls in the azure-native modules

    if mocks is None:
        mocks = AzureMocks(subscription_id, mode=mode, state=state, upload_endpoint=upload_endpoint)
    pulumi.runtime.set_mocks(
        mocks,
        project=project,
        stack=stack,
        preview=mocks.preview,
        monitor=_RecordingMonitor(mocks),
    )
    values = {}
    for key, value in config.items():
        full = key if ":" in key else f"{project}:{key}"
        values[full] = value if isinstance(value, str) else json.dumps(value)
    pulumi.runtime.set_all_config(values)
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def run():
        declared = program.declare(program.read_config())
        return pulumi.Output.all(**declared).apply(outputs.update)

    run()
    # Registration order depends on when outputs resolve; URN order is stable across runs.
    return Rendering(stack, sorted(mocks.resources, key=lambda r: r.urn), outputs)


def render_stack_file(path: Path, mode: str = UPDATE) -> Rendering:
    """`render` for `stacks/Pulumi.<stack>.yaml`."""
    path = Path(path)
    return render(read_stack_file(path), stack_name_of(path), mode=mode)
