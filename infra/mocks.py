"""Run the program offline under the Pulumi SDK's mocks, and record what it declares.

`AzureMocks` answers only what Azure itself would: each resource's ARM id and the properties
Azure computes (storage endpoints, registry login server, identity ids, an ACR Tasks run's
pushed images), the `getClientConfig` and `listRegistryBuildSourceUploadUrl` calls, and a
RandomId's bytes; in an update it runs a dynamic resource's `create`, as the engine does. It
never fills in inputs, so a missing required property still fails in the azure-native SDK as it
would at deploy time. `render(...)` / `render_stack_file(...)` run the
whole program for one stack and return every recorded resource (type token, logical name,
inputs as Azure sees them, parent, protect/retain/deleteBeforeReplace) and the stack outputs.
The infra tests and `azdl plan` both use it.
"""

import base64
import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Mapping
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
}
DYNAMIC = "pulumi-python:dynamic:Resource"  # a Python dynamic provider's resource
RANDOM_ID = "random:index/randomId:RandomId"
# Where the mocked listBuildSourceUploadUrl points uploads unless a test serves its own.
UPLOAD_ENDPOINT = "https://acrtasksourcemock.blob.core.windows.net/source"


@dataclass
class RecordedResource:
    type: str  # e.g. azure-native:storage:StorageAccount
    name: str  # Pulumi's logical name
    inputs: dict[str, Any]  # camelCase, as sent to Azure
    custom: bool
    id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)  # what Azure answered
    urn: str = ""
    parent: str = ""  # the parent's URN
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    dependencies: list[str] = field(default_factory=list)  # URNs it waits for (any property)


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


def _stable_guid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "azdl-mock://" + "/".join(parts)))


class AzureMocks(pulumi.runtime.Mocks):
    """`subscription_id`: the subscription `getClientConfig` answers with (the deploying
    identity's); the global names derive from it (infra/naming.py)."""

    def __init__(
        self,
        subscription_id: str = SUBSCRIPTION_ID,
        preview: bool = True,
        upload_endpoint: str = UPLOAD_ENDPOINT,
        random_bytes: Callable[[str, int], bytes] | None = None,
    ) -> None:
        """`random_bytes(name, n)`: what a RandomId draws; by default derived from its name,
        so renderings compare equal (a model of several deployments passes os.urandom)."""
        self.random_bytes = random_bytes or (
            lambda name, n: hashlib.sha256(f"random/{name}".encode()).digest()[:n]
        )
        self.subscription_id = subscription_id
        self.preview = preview
        self.upload_endpoint = upload_endpoint
        self._uploads = 0
        self.resources: list[RecordedResource] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "clientId": _stable_guid("client"),
                "objectId": CLIENT_OBJECT_ID,
                "subscriptionId": self.subscription_id,
                "tenantId": TENANT_ID,
            }, []
        if args.token == "azure-native:containerregistry:listRegistryBuildSourceUploadUrl":
            # ACR answers with a SAS URL on storage of its own and the path a run names.
            with self._lock:
                self._uploads += 1
                n = self._uploads
            blob = f"{args.args['registryName']}/{n:04d}.tar.gz"
            return {
                "uploadUrl": f"{self.upload_endpoint}/{blob}?sv=mock&sig=mock",
                "relativePath": f"source/mock/{blob}",
            }, []
        raise NotImplementedError(f"no Azure answer is mocked for the call {args.token}")

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if args.typ == DYNAMIC:
            return self._dynamic(args)
        inputs = _one_unknown(dict(args.inputs))
        record = RecordedResource(args.typ, args.name, inputs, bool(args.custom))
        self._local.last = record
        with self._lock:
            self.resources.append(record)
        if not args.custom:
            return None, {}
        state = dict(inputs)
        short = args.typ.removeprefix("azure-native:")
        name_key, path = ARM.get(short, (None, None))
        if short in ARM:
            state["name"] = inputs.get(name_key) or args.name
            record.id = arm_id(short, state, path, self.subscription_id)
        state.update(_computed(short, state))
        if args.typ == RANDOM_ID:
            drawn = self.random_bytes(args.name, int(inputs["byteLength"]))
            state.update(hex=drawn.hex(), b64Url=base64.urlsafe_b64encode(drawn).decode())
        if short not in ARM:
            record.id = f"{args.name}-id"
        record.state = state
        return record.id, state

    def _dynamic(self, args: pulumi.runtime.MockResourceArgs):
        """A dynamic provider's resource: its code runs on the deploying machine, so the engine
        calls its `create` during an update (not in a preview), and so does this mock."""
        props = {k: _unsecret(v) for k, v in args.inputs.items() if k != PROVIDER_KEY}
        record = RecordedResource(args.typ, args.name, _one_unknown(props), bool(args.custom))
        self._local.last = record
        with self._lock:
            self.resources.append(record)
        if self.preview:
            return f"{args.name}-preview", props
        provider = dynamic_provider(_unsecret(args.inputs[PROVIDER_KEY]))
        result = provider.create(props)
        record.id, record.state = result.id, dict(result.outs or {})
        return result.id, record.state


def _unsecret(value: Any) -> Any:
    """A mock input as a provider receives it: a secret's plain value."""
    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return value["value"]
    return value


def dynamic_provider(serialized: str) -> pulumi.dynamic.ResourceProvider:
    """The provider object a dynamic resource carries (as the engine's provider host loads it)."""
    return dill.loads(base64.b64decode(serialized))


def _one_unknown(value: Any) -> Any:
    """`value` with every unknown (a preview's not-yet-computed input) as `pulumi.UNKNOWN`, so
    that recorded inputs compare equal across renderings."""
    if isinstance(value, pulumi.output.Unknown):
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
    group = f"/subscriptions/{subscription_id}/resourceGroups/"
    if path is None:  # the resource group itself
        return group + state["name"]
    return f"{group}{state['resourceGroupName']}/providers/{path.format(**state)}"


def _computed(short_type: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """Read-only properties Azure returns for a created resource."""
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
                principalId=_stable_guid(name, "system"), tenantId=TENANT_ID
            )
    if short_type == "storage:StorageAccount":
        computed["primaryEndpoints"] = {
            svc: f"https://{name}.{svc}.core.windows.net/"
            for svc in ("blob", "dfs", "file", "queue", "table")
        }
    if short_type == "containerregistry:Registry":
        computed["loginServer"] = f"{name}.azurecr.io"
    if short_type == "resources:Resource" and state.get("resourceType") == "registries":
        computed["properties"] = {
            **state.get("properties", {}),
            "loginServer": f"{name}.azurecr.io",
        }
    if short_type == "containerregistry:TaskRun":
        # ACR answers a finished run with the images it pushed (RunResponse.outputImages).
        request = state.get("runRequest", {})
        images = []
        for image in request.get("imageNames", []) if request.get("isPushEnabled") else []:
            repository, _, tag = image.partition(":")
            digest = (
                "sha256:"
                + hashlib.sha256(f"{request.get('sourceLocation')}/{image}".encode()).hexdigest()
            )
            images.append({"repository": repository, "tag": tag, "digest": digest})
        computed["runResult"] = {
            "runId": "ca" + hashlib.sha256(name.encode()).hexdigest()[:4],
            "status": "Succeeded",
            "outputImages": images,
        }
    if short_type == "managedidentity:UserAssignedIdentity":
        computed.update(
            clientId=_stable_guid(name, "client"),
            principalId=_stable_guid(name, "principal"),
            tenantId=TENANT_ID,
        )
    return computed


class _RecordingMonitor(MockMonitor):
    """Adds what only the engine sees (URN, parent, protect, retainOnDelete) to each record."""

    def RegisterResource(self, request):
        self.mocks._local.last = None
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
        return response


def render(
    config: Mapping[str, Any],
    stack: str,
    project: str = PROJECT,
    preview: bool = True,
    subscription_id: str = SUBSCRIPTION_ID,
    upload_endpoint: str = UPLOAD_ENDPOINT,
    mocks: "AzureMocks | None" = None,
) -> Rendering:
    """Run the program for `stack` with `config` (keys with or without `azdl:`; values as in a
    stack file) under mocks. Raises `infra.config.ConfigError` for invalid config.

    `preview=True` runs it as `pulumi preview` does: nothing is uploaded or built, and nothing
    leaves this machine. `preview=False` runs it as `pulumi up` does: the dynamic resources'
    code runs, so each image's build context is uploaded to `upload_endpoint` (where the
    mocked `listBuildSourceUploadUrl` points; tests serve it). `subscription_id` is the
    subscription Azure answers with; the global names derive from it. `mocks` replaces the
    default AzureMocks (e.g. one that models a subscription across deployments).
    """
    from infra import program  # imported here: it pulls in the azure-native modules

    if mocks is None:
        mocks = AzureMocks(subscription_id, preview=preview, upload_endpoint=upload_endpoint)
    pulumi.runtime.set_mocks(
        mocks, project=project, stack=stack, preview=preview, monitor=_RecordingMonitor(mocks)
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


def render_stack_file(path: Path) -> Rendering:
    """`render` for `stacks/Pulumi.<stack>.yaml`."""
    path = Path(path)
    return render(read_stack_file(path), stack_name_of(path))
