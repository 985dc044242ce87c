"""`AzureMocks`: the Pulumi SDK's mocks answering as Azure and the engine would, in one of
three modes (a preview of a create or an update, or `pulumi up`), each resource taking the
engine's step against an earlier state (docs/architecture.md, "The mocks"). Its preview of a
create is `azdl plan`'s own, `infra.mocks.PreviewMocks`: the engine adds the steps, the state
and what Azure answers an update with."""

import base64
import hashlib
import itertools
import json
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import dill
import pulumi
import pulumi.dynamic
from pulumi.dynamic.dynamic import PROVIDER_KEY
from pulumi.runtime import rpc

from infra.mocks import (
    DYNAMIC,
    RANDOM_ID,
    SUBSCRIPTION_ID,
    PreviewMocks,
    preview_outputs,
    unsecret,
)
from tests.support.mock_engine.azure_state import (
    ARM,
    SUCCEEDED,
    SourceStore,
    arm_id,
    computed_properties,
)

PREVIEW_CREATE = "preview-create"  # `pulumi preview` of a new stack
PREVIEW_UPDATE = "preview-update"  # `pulumi preview` of a stack that has a state
UPDATE = "update"  # `pulumi up`
MODES = (PREVIEW_CREATE, PREVIEW_UPDATE, UPDATE)
# The steps the engine takes for a resource (pulumi/pulumi, pkg/resource/deploy/step_generator.go).
CREATE, SAME, UPDATED, REPLACE = "create", "same", "update", "replace"
# Outputs the provider keeps from the old state in the preview of an update
# (pulumi-azure-native provider/pkg/provider/provider.go, `Update`, "stableOutputs"; commit
# 006a62afe453b416e5d5c98d2d91c4c7281f52f9).
STABLE_OUTPUTS = ("name", "location")
UPLOAD_URL = "azure-native:containerregistry:listRegistryBuildSourceUploadUrl"


@dataclass
class RecordedResource:
    type: str  # e.g. azure-native:storage:StorageAccount
    name: str  # Pulumi's logical name
    inputs: dict[str, Any]  # camelCase, as sent to Azure
    custom: bool
    id: str | None = None  # None while unknown (a preview of a create)
    state: dict[str, Any] = field(default_factory=dict)  # what Azure answered
    urn: str = ""
    parent: str = ""  # the parent's URN
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    dependencies: list[str] = field(default_factory=list)  # URNs it waits for (any property)
    replace_with: list[str] = field(default_factory=list)  # URNs whose replacement replaces it
    replace_on_changes: list[str] = field(default_factory=list)
    custom_timeouts: dict[str, str] = field(default_factory=dict)  # create/update/delete
    error_hooks: list[str] = field(default_factory=list)  # names of its on_error hooks
    step: str = CREATE  # what the engine did with it (CREATE, SAME, UPDATED, REPLACE)


class AzureMocks(PreviewMocks):
    """`subscription_id`: the subscription `getClientConfig` answers with (the deploying
    identity's); the global names derive from it (infra/naming.py). `mode`: PREVIEW_CREATE,
    PREVIEW_UPDATE or UPDATE (docs/architecture.md, "The mocks"). `state`: the Pulumi state
    of an earlier deployment, by (type, logical name); PREVIEW_UPDATE needs one. `replace`:
    URNs named with `pulumi up --replace`. `upload_endpoint`: where the mocked
    listBuildSourceUploadUrl points (by default the shared local SourceStore).
    `run_status(name, state)`: the status ACR reports for the task run `name` (SUCCEEDED
    unless a test says otherwise). `upload_numbers`: numbers the source upload paths (a model
    of several deployments passes one counter to all: ACR never hands out a path twice)."""

    def __init__(
        self,
        subscription_id: str = SUBSCRIPTION_ID,
        mode: str = UPDATE,
        state: Mapping[tuple[str, str], RecordedResource] | None = None,
        replace: Collection[str] = (),
        upload_endpoint: str | None = None,
        random_bytes: Callable[[str, int], bytes] | None = None,
        run_status: Callable[[str, Mapping[str, Any]], str] | None = None,
        upload_numbers: Iterator[int] | None = None,
    ) -> None:
        """`random_bytes(name, n)`: what a RandomId draws; by default derived from its name,
        so renderings compare equal (a model of several deployments passes os.urandom)."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        if mode == PREVIEW_UPDATE and not state:
            raise ValueError("the preview of an update needs the state of an earlier `up`")
        super().__init__(subscription_id)
        self.random_bytes = random_bytes or (
            lambda name, n: hashlib.sha256(f"random/{name}".encode()).digest()[:n]
        )
        self.mode = mode
        self.preview = mode != UPDATE
        self.prior = dict(state or {})
        self.replace = set(replace)
        self._upload_endpoint = upload_endpoint
        self.run_status = run_status or (lambda _name, _state: SUCCEEDED)
        self.upload_numbers = upload_numbers or itertools.count(1)
        self.resources: list[RecordedResource] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def upload_endpoint(self) -> str:
        if self._upload_endpoint is None:
            self._upload_endpoint = SourceStore.shared().endpoint
        return self._upload_endpoint

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == UPLOAD_URL:
            # ACR answers with a SAS URL on storage of its own and the path a run names; every
            # call gets a new one.
            with self._lock:
                n = next(self.upload_numbers)
            blob = f"{args.args['registryName']}/{n:04d}.tar.gz"
            return {
                "uploadUrl": f"{self.upload_endpoint}/{blob}?sv=mock&sig=mock",
                "relativePath": f"source/mock/{blob}",
            }, []
        return super().call(args)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        urn = getattr(self._local, "urn", "")
        if args.typ == DYNAMIC:
            return self._dynamic(args, urn)
        inputs = _one_unknown(dict(args.inputs))
        record = RecordedResource(args.typ, args.name, inputs, bool(args.custom))
        self._local.last = record
        with self._lock:
            self.resources.append(record)
        if not args.custom:
            return None, {}
        old = self.prior.get((args.typ, args.name))
        if old is not None and urn not in self.replace and old.inputs == inputs:
            # The engine's same step: the old id and outputs; no provider is called.
            record.step, record.id, record.state = SAME, old.id, old.state
            return record.id, record.state
        # A change is an update, or a replacement where `replace_on_changes` says "*" (the
        # engine's applyReplaceOnChanges) or `pulumi up --replace` names the resource.
        replaced = urn in self.replace or "*" in getattr(self._local, "replace_on_changes", ())
        record.step = CREATE if old is None else REPLACE if replaced else UPDATED
        if self.preview and record.step != UPDATED:
            record.id, record.state = self._preview_create(args)
        elif self.preview:
            record.id, record.state = self._preview_update(args.typ, inputs, old)
        else:
            record.id, record.state = self._answer(args.typ, args.name, inputs)
        return record.id, record.state

    def _preview_create(self, args: pulumi.runtime.MockResourceArgs):
        """`azdl plan`'s own answer (PreviewMocks), its unknowns recorded as one value."""
        rid, outputs = super().new_resource(args)
        return rid, _one_unknown(outputs)

    def _preview_update(self, typ: str, inputs: dict, old: RecordedResource):
        """(id, outputs) of an update's preview: the old id, and the outputs of a create's
        preview plus STABLE_OUTPUTS from the old state (pulumi-azure-native
        provider/pkg/provider/provider.go, `Update`, commit
        006a62afe453b416e5d5c98d2d91c4c7281f52f9). A RandomId keeps what it drew."""
        if typ == RANDOM_ID:
            return old.id, old.state
        if not typ.startswith("azure-native:"):
            raise NotImplementedError(f"no preview is mocked for the type {typ}")
        outputs = preview_outputs(typ, inputs)
        for key in STABLE_OUTPUTS:
            if key in old.state:
                outputs[key] = old.state[key]
        return old.id, outputs

    def _answer(self, typ: str, name: str, inputs: dict) -> tuple[str, dict]:
        """(id, outputs) Azure answers a create or update with."""
        state = dict(inputs)
        short = typ.removeprefix("azure-native:")
        name_key, path = ARM.get(short, (None, None))
        rid = f"{name}-id"
        if short in ARM:
            state["name"] = inputs.get(name_key) or name
            rid = arm_id(short, state, path, self.subscription_id)
        if short == "containerregistry:TaskRun":
            state["runResult"] = self._run_result(name, state)
        state.update(computed_properties(short, state))
        if typ == RANDOM_ID:
            drawn = self.random_bytes(name, int(inputs["byteLength"]))
            state.update(hex=drawn.hex(), b64Url=base64.urlsafe_b64encode(drawn).decode())
        return rid, state

    def _run_result(self, name: str, state: Mapping[str, Any]) -> dict[str, Any]:
        """What ACR answers a task run with once it has ended (RunResponse): its id, its status
        (`run_status`) and, when it succeeded, the images it pushed."""
        request = state.get("runRequest", {})
        if request.get("type") != "TaskRunRequest":
            raise NotImplementedError(f"no ACR answer is mocked for a {request.get('type')}")
        # The task's Docker step, its context overridden by the run or not.
        task = next(r for r in self.resources if r.id and r.id == request.get("taskId"))
        build = task.inputs["step"]
        context = request.get("overrideTaskStepProperties", {}).get("contextPath")
        context = context or build.get("contextPath")
        seed = json.dumps([name, state.get("forceUpdateTag"), context], sort_keys=True)
        run_id = "ca" + hashlib.sha256(seed.encode()).hexdigest()[:4]
        status = self.run_status(name, state)
        images = []
        if status == SUCCEEDED and build.get("isPushEnabled", True):
            for image in build.get("imageNames", []):
                repository, _, tag = image.partition(":")
                digest = hashlib.sha256(f"{context}/{image}".encode()).hexdigest()
                images.append({"repository": repository, "tag": tag, "digest": f"sha256:{digest}"})
        return {"runId": run_id, "status": status, "outputImages": images}

    def _dynamic(self, args: pulumi.runtime.MockResourceArgs, urn: str):
        """A dynamic provider's resource: its code runs on the deploying machine. The engine
        asks its `diff` whenever the resource is in the state, and calls its `create` in an
        update (not in a preview: the dynamic provider does not support preview, so a preview
        shows its inputs)."""
        props = {k: unsecret(v) for k, v in args.inputs.items() if k != PROVIDER_KEY}
        record = RecordedResource(args.typ, args.name, _one_unknown(props), bool(args.custom))
        self._local.last = record
        with self._lock:
            self.resources.append(record)
        provider = dynamic_provider(unsecret(args.inputs[PROVIDER_KEY]))
        old = self.prior.get((args.typ, args.name))
        record.step = CREATE
        if old is not None:
            diff = provider.diff(old.id, old.state, props)
            if urn in self.replace or diff.replaces:
                record.step = REPLACE
            elif not diff.changes:
                record.step, record.id, record.state = SAME, old.id, old.state
                return record.id, record.state
            else:
                record.step = UPDATED
        if self.preview and record.step != UPDATED:
            record.id, record.state = self._preview_create(args)
            return record.id, record.state
        if self.preview:
            record.id = old.id
            return record.id, props
        if record.step == UPDATED:
            result = provider.update(old.id, old.state, props)
            record.id, record.state = old.id, dict(result.outs or {})
        else:
            result = provider.create(props)
            record.id, record.state = result.id, dict(result.outs or {})
        return record.id, record.state


def dynamic_provider(serialized: str) -> pulumi.dynamic.ResourceProvider:
    """The provider object a dynamic resource carries (as the engine's provider host loads it)."""
    return dill.loads(base64.b64decode(serialized))


def _one_unknown(value: Any) -> Any:
    """`value` with every unknown (a preview's not-yet-computed input) as `pulumi.UNKNOWN`, so
    that recorded inputs compare equal across renderings."""
    if isinstance(value, pulumi.output.Unknown) or value == rpc.UNKNOWN:
        return pulumi.UNKNOWN
    if isinstance(value, dict):
        return {k: _one_unknown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_one_unknown(v) for v in value]
    return value
