"""Run the program offline under the Pulumi SDK's mocks, and record what it declares.

`AzureMocks` answers only what Azure and the Pulumi engine would, in one of three modes:

- `PREVIEW_CREATE`, the preview of a new stack (`pulumi preview` before the first `up`), and
- `PREVIEW_UPDATE`, the preview of an update of an existing stack: each resource's outputs
  are what pulumi-azure-native's own preview gives, `provider/pkg/convert/previewOutputs.go`
  (pulumi/pulumi-azure-native, commit 604cfd525f965477da629fdb2474063bdce7d798): every output
  property of the resource's schema takes the input of the same name, an Any-typed property
  (the generic `resources.Resource`'s `properties`, and the oneOf properties the SDK types as
  Any) takes the whole input value, an object property is filled the same way one level down,
  and everything else is unknown. In a preview of a create the provider returns no id
  (`provider/pkg/provider/provider.go`, `Create`, commit
  006a62afe453b416e5d5c98d2d91c4c7281f52f9); in a preview of an update it returns the same
  outputs plus `name` and `location` from the old state (`Update`: "stableOutputs"), and the
  id stays. The schema is read from the Python SDK's own output types, which are generated
  from the provider's schema. A RandomId's computed values and a dynamic resource's outputs
  (the dynamic provider does not support preview) stay unknown or are its inputs.
- `UPDATE`, `pulumi up`: each created or updated resource gets its ARM id and the properties
  Azure computes (storage endpoints, registry login server, identity principals, an ACR Tasks
  run's pushed images), and a dynamic resource's `create` runs, as the engine does.

With `state` (the Pulumi state an earlier rendering left, by type and logical name), each
resource goes through the engine's steps (pulumi/pulumi, pkg/resource/deploy/step_generator.go):
unchanged inputs are a same step that keeps the old id and outputs and calls no provider;
changed inputs an update; a resource named in `replace` (`pulumi up --replace <urn>`) or one
whose dynamic provider's diff asks for it is replaced; anything new is created. The step is
recorded. A replacement that azure-native's own Diff would decide (a changed path parameter,
such as a name) is not modelled: such a change is treated as an update.

The mocks never fill in inputs, so a missing required property still fails in the azure-native
SDK as it would at deploy time. `render(...)` / `render_stack_file(...)` run the whole program
for one stack and return every recorded resource (type token, logical name, inputs as Azure
sees them, parent, protect/retain/deleteBeforeReplace, replaceWith, the step) and the stack
outputs. The infra tests use it; `azdl plan` uses `AzureMocks` for its invokes.
"""

import base64
import collections.abc
import functools
import hashlib
import http.server
import importlib
import itertools
import json
import threading
import typing
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dill
import pulumi
import pulumi.dynamic
from pulumi.dynamic.dynamic import PROVIDER_KEY
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

from infra.config import PROJECT, read_stack_file, stack_name_of

SUBSCRIPTION_ID = "00000000-0000-0000-0000-0000000000aa"
TENANT_ID = "00000000-0000-0000-0000-0000000000bb"
CLIENT_OBJECT_ID = "00000000-0000-0000-0000-0000000000cc"

# Type token -> (input that carries the Azure name, ARM path below the resource group).
ARM = {
    "resources:ResourceGroup": ("resourceGroupName", None),
    "network:VirtualNetwork": ("virtualNetworkName", "Microsoft.Network/virtualNetworks/{name}"),
    "network:Subnet": (
        "subnetName",
        "Microsoft.Network/virtualNetworks/{virtualNetworkName}/subnets/{name}",
    ),
    "network:NetworkSecurityGroup": (
        "networkSecurityGroupName",
        "Microsoft.Network/networkSecurityGroups/{name}",
    ),
    "network:PublicIPAddress": (
        "publicIpAddressName",
        "Microsoft.Network/publicIPAddresses/{name}",
    ),
    "network:NatGateway": ("natGatewayName", "Microsoft.Network/natGateways/{name}"),
    "network:BastionHost": ("bastionHostName", "Microsoft.Network/bastionHosts/{name}"),
    "network:NetworkInterface": (
        "networkInterfaceName",
        "Microsoft.Network/networkInterfaces/{name}",
    ),
    "compute:VirtualMachine": ("vmName", "Microsoft.Compute/virtualMachines/{name}"),
    "compute:VirtualMachineExtension": (
        "vmExtensionName",
        "Microsoft.Compute/virtualMachines/{vmName}/extensions/{name}",
    ),
    "network:PrivateEndpoint": ("privateEndpointName", "Microsoft.Network/privateEndpoints/{name}"),
    "network:PrivateDnsZoneGroup": (
        "privateDnsZoneGroupName",
        "Microsoft.Network/privateEndpoints/{privateEndpointName}/privateDnsZoneGroups/{name}",
    ),
    "privatedns:PrivateZone": ("privateZoneName", "Microsoft.Network/privateDnsZones/{name}"),
    "privatedns:VirtualNetworkLink": (
        "virtualNetworkLinkName",
        "Microsoft.Network/privateDnsZones/{privateZoneName}/virtualNetworkLinks/{name}",
    ),
    "storage:StorageAccount": ("accountName", "Microsoft.Storage/storageAccounts/{name}"),
    "storage:BlobContainer": (
        "containerName",
        "Microsoft.Storage/storageAccounts/{accountName}/blobServices/default/containers/{name}",
    ),
    "storage:BlobServiceProperties": (
        "blobServicesName",
        "Microsoft.Storage/storageAccounts/{accountName}/blobServices/{name}",
    ),
    "storage:ManagementPolicy": (
        "managementPolicyName",
        "Microsoft.Storage/storageAccounts/{accountName}/managementPolicies/{name}",
    ),
    "storage:FileShare": (
        "shareName",
        "Microsoft.Storage/storageAccounts/{accountName}/fileServices/default/shares/{name}",
    ),
    "containerregistry:Registry": (
        "registryName",
        "Microsoft.ContainerRegistry/registries/{name}",
    ),
    # The provider's generic ARM resource (the registry at an API version the typed one lacks).
    "resources:Resource": ("resourceName", "{resourceProviderNamespace}/{resourceType}/{name}"),
    "containerregistry:Task": (
        "taskName",
        "Microsoft.ContainerRegistry/registries/{registryName}/tasks/{name}",
    ),
    "containerregistry:TaskRun": (
        "taskRunName",
        "Microsoft.ContainerRegistry/registries/{registryName}/taskRuns/{name}",
    ),
    "keyvault:Vault": ("vaultName", "Microsoft.KeyVault/vaults/{name}"),
    "operationalinsights:Workspace": (
        "workspaceName",
        "Microsoft.OperationalInsights/workspaces/{name}",
    ),
    "applicationinsights:Component": ("resourceName", "Microsoft.Insights/components/{name}"),
    "machinelearningservices:Workspace": (
        "workspaceName",
        "Microsoft.MachineLearningServices/workspaces/{name}",
    ),
    "machinelearningservices:Compute": (
        "computeName",
        "Microsoft.MachineLearningServices/workspaces/{workspaceName}/computes/{name}",
    ),
    "managedidentity:UserAssignedIdentity": (
        "resourceName",
        "Microsoft.ManagedIdentity/userAssignedIdentities/{name}",
    ),
    "machinelearningservices:EnvironmentContainer": (
        "name",
        "Microsoft.MachineLearningServices/workspaces/{workspaceName}/environments/{name}",
    ),
    "machinelearningservices:EnvironmentVersion": (
        "name",
        "Microsoft.MachineLearningServices/workspaces/{workspaceName}/environments/{name}"
        "/versions/{version}",
    ),
    "machinelearningservices:Datastore": (
        "name",
        "Microsoft.MachineLearningServices/workspaces/{workspaceName}/datastores/{name}",
    ),
    "authorization:RoleAssignment": ("roleAssignmentName", None),
    # An extension resource: its id is below the resource it configures.
    "monitor:DiagnosticSetting": ("name", None),
}
DYNAMIC = "pulumi-python:dynamic:Resource"  # a Python dynamic provider's resource
RANDOM_ID = "random:index/randomId:RandomId"

PREVIEW_CREATE = "preview-create"  # `pulumi preview` of a new stack
PREVIEW_UPDATE = "preview-update"  # `pulumi preview` of a stack that has a state
UPDATE = "update"  # `pulumi up`
MODES = (PREVIEW_CREATE, PREVIEW_UPDATE, UPDATE)
# The steps the engine takes for a resource (pkg/resource/deploy/step_generator.go).
CREATE, SAME, UPDATED, REPLACE = "create", "same", "update", "replace"
# Outputs the provider keeps from the old state in the preview of an update (provider.go,
# `Update`, "stableOutputs").
STABLE_OUTPUTS = ("name", "location")
# The status ACR reports for a task run that pushed its images (RunStatus, ARM spec
# containerregistry_build.json 2019-06-01-preview).
SUCCEEDED = "Succeeded"


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


def _stable_guid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "azdl-mock://" + "/".join(parts)))


class SourceStore:
    """Stands in for the storage ACR Tasks hands out upload URLs on (Azure Blob Storage's Put
    Blob answers 201 Created): keeps every body PUT to it, by path. One per process, started
    the first time an update needs it."""

    _instance: "SourceStore | None" = None

    def __init__(self) -> None:
        self.received: dict[str, bytes] = {}
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                store.received[self.path.split("?", 1)[0]] = body
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/source"

    @classmethod
    def shared(cls) -> "SourceStore":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


class AzureMocks(pulumi.runtime.Mocks):
    """`subscription_id`: the subscription `getClientConfig` answers with (the deploying
    identity's); the global names derive from it (infra/naming.py). `mode`: PREVIEW_CREATE,
    PREVIEW_UPDATE or UPDATE (module docstring). `state`: the Pulumi state of an earlier
    deployment, by (type, logical name); PREVIEW_UPDATE needs one. `replace`: URNs named with
    `pulumi up --replace`. `upload_endpoint`: where the mocked listBuildSourceUploadUrl points
    (by default the shared local SourceStore). `run_status(name, state)`: the status ACR
    reports for the task run `name` (SUCCEEDED unless a test says otherwise).
    `upload_numbers`: numbers the source upload paths (a model of several deployments passes
    one counter to all: ACR never hands out a path twice)."""

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
        self.random_bytes = random_bytes or (
            lambda name, n: hashlib.sha256(f"random/{name}".encode()).digest()[:n]
        )
        self.subscription_id = subscription_id
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
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "clientId": _stable_guid("client"),
                "objectId": CLIENT_OBJECT_ID,
                "subscriptionId": self.subscription_id,
                "tenantId": TENANT_ID,
            }, []
        if args.token == "azure-native:containerregistry:listRegistryBuildSourceUploadUrl":
            # ACR answers with a SAS URL on storage of its own and the path a run names; every
            # call gets a new one.
            with self._lock:
                n = next(self.upload_numbers)
            blob = f"{args.args['registryName']}/{n:04d}.tar.gz"
            return {
                "uploadUrl": f"{self.upload_endpoint}/{blob}?sv=mock&sig=mock",
                "relativePath": f"source/mock/{blob}",
            }, []
        raise NotImplementedError(f"no Azure answer is mocked for the call {args.token}")

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
        if self.preview:
            record.id, record.state = self._preview(args.typ, inputs, old, record.step)
        else:
            record.id, record.state = self._answer(args.typ, args.name, inputs)
        return record.id, record.state

    def _preview(self, typ: str, inputs: dict, old: RecordedResource | None, step: str):
        """(id, outputs) of a create's or an update's preview."""
        if typ == RANDOM_ID:  # random's computed values are unknown until it is created
            return (old.id, old.state) if step == UPDATED else (None, _unsecret(inputs))
        if not typ.startswith("azure-native:"):
            raise NotImplementedError(f"no preview is mocked for the type {typ}")
        outputs = preview_outputs(typ, inputs)
        if step != UPDATED:
            return None, outputs
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
        state.update(_computed(short, state))
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
        props = {k: _unsecret(v) for k, v in args.inputs.items() if k != PROVIDER_KEY}
        record = RecordedResource(args.typ, args.name, _one_unknown(props), bool(args.custom))
        self._local.last = record
        with self._lock:
            self.resources.append(record)
        provider = dynamic_provider(_unsecret(args.inputs[PROVIDER_KEY]))
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
        if self.preview:
            record.id = old.id if record.step == UPDATED else None
            return record.id, props
        if record.step == UPDATED:
            result = provider.update(old.id, old.state, props)
            record.id, record.state = old.id, dict(result.outs or {})
        else:
            result = provider.create(props)
            record.id, record.state = result.id, dict(result.outs or {})
        return record.id, record.state


def preview_outputs(token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What pulumi-azure-native's preview answers for a resource of type `token` with `inputs`
    (convert/previewOutputs.go, `PreviewOutputs`): its schema's output properties, each the
    input of the same name shaped by the property's type, or unknown."""
    return _preview_object(_output_types(token), _unsecret(inputs))


@functools.cache
def _output_types(token: str) -> dict[str, Any]:
    """The output properties of an azure-native resource type and their types, from the
    Python SDK's generated resource class (camelCase names, as on the wire)."""
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


def _unsecret(value: Any) -> Any:
    """A mock input as a provider receives it: a secret's plain value, at any depth."""
    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return _unsecret(value["value"])
    if isinstance(value, dict):
        return {k: _unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsecret(v) for v in value]
    return value


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


def arm_id(
    short_type: str,
    state: Mapping[str, Any],
    path: str | None,
    subscription_id: str = SUBSCRIPTION_ID,
) -> str:
    if short_type == "authorization:RoleAssignment":
        return f"{state['scope']}/providers/Microsoft.Authorization/roleAssignments/{state['name']}"
    if short_type == "monitor:DiagnosticSetting":
        target, name = state["resourceUri"], state["name"]
        return f"{target}/providers/Microsoft.Insights/diagnosticSettings/{name}"
    group = f"/subscriptions/{subscription_id}/resourceGroups/"
    if path is None:  # the resource group itself
        return group + state["name"]
    return f"{group}{state['resourceGroupName']}/providers/{path.format(**state)}"


def _computed(short_type: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """Read-only properties Azure returns for a created or updated resource."""
    name = state.get("name", "")
    computed: dict[str, Any] = {}
    identity = state.get("identity")
    if isinstance(identity, Mapping):
        # Azure answers a list of user-assigned identity ids with a map id -> identity, and
        # gives a system identity its principal.
        computed["identity"] = dict(identity)
        assigned = identity.get("userAssignedIdentities")
        if isinstance(assigned, list):
            computed["identity"]["userAssignedIdentities"] = {
                i: {
                    "clientId": _stable_guid(i, "client"),
                    "principalId": _stable_guid(i, "principal"),
                }
                for i in assigned
            }
        if "SystemAssigned" in str(identity.get("type", "")):
            computed["identity"].update(
                principalId=_stable_guid(short_type, name, "system"), tenantId=TENANT_ID
            )
    if short_type == "storage:StorageAccount":
        computed["primaryEndpoints"] = {
            svc: f"https://{name}.{svc}.core.windows.net/"
            for svc in ("blob", "dfs", "file", "queue", "table")
        }
    # A registry's login server is its name, lowercased, under the cloud's registry domain
    # (infra/registry.py says where that is documented); the mocks answer for the public cloud.
    if short_type == "containerregistry:Registry":
        computed["loginServer"] = f"{name.lower()}.azurecr.io"
    if short_type == "resources:Resource" and state.get("resourceType") == "registries":
        computed["properties"] = {
            **state.get("properties", {}),
            "loginServer": f"{name.lower()}.azurecr.io",
        }
    if short_type == "managedidentity:UserAssignedIdentity":
        computed.update(
            clientId=_stable_guid(name, "client"),
            principalId=_stable_guid(name, "principal"),
            tenantId=TENANT_ID,
        )
    return computed


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
    PREVIEW_UPDATE run it as `pulumi preview` does (module docstring): nothing is uploaded or
    built, and nothing leaves this machine. `state`: the Pulumi state of an earlier `up`
    (`Rendering.state()`). `subscription_id` is the subscription Azure answers with; the
    global names derive from it. `mocks` replaces the default AzureMocks (e.g. one that models
    a subscription across deployments).
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
