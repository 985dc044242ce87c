"""What Azure answers a create or update with, as the test engine gives it: the ARM id of
each resource type, the read-only properties Azure computes, and a stand-in for the storage
ACR Tasks hands out source upload URLs on."""

import http.server
import threading
from collections.abc import Mapping
from typing import Any

from infra.mocks import SUBSCRIPTION_ID, TENANT_ID, stable_guid

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

# The status ACR reports for a task run that pushed its images (RunStatus, ARM spec
# containerregistry_build.json 2019-06-01-preview).
SUCCEEDED = "Succeeded"


class SourceStore:
    """Stands in for the storage ACR Tasks hands out upload URLs on (Azure Blob Storage's Put
    Blob answers 201 Created): keeps every body PUT to it, by path. One per process, started
    the first time an update needs it (by the first of the threads that ask at once)."""

    _instance: "SourceStore | None" = None
    _starting = threading.Lock()  # the mocks answer invokes on several threads at once

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
        with cls._starting:
            if cls._instance is None:
                cls._instance = cls()
        return cls._instance


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


def computed_properties(short_type: str, state: Mapping[str, Any]) -> dict[str, Any]:
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
                    "clientId": stable_guid(i, "client"),
                    "principalId": stable_guid(i, "principal"),
                }
                for i in assigned
            }
        if "SystemAssigned" in str(identity.get("type", "")):
            computed["identity"].update(
                principalId=stable_guid(short_type, name, "system"), tenantId=TENANT_ID
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
            clientId=stable_guid(name, "client"),
            principalId=stable_guid(name, "principal"),
            tenantId=TENANT_ID,
        )
    return computed
