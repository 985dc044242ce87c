"""Azure and Pulumi facts that the program, the policy pack and the CLI share: resource-type
tokens, built-in role ids, the tags every resource carries, and how a value known only after
deployment is read. Pure Python (no Pulumi import): infra.config and the CLI import it cheaply.
"""

from collections.abc import Mapping, Sequence
from typing import Any

# ---- resource-type tokens --------------------------------------------------------------------
# `azure-native:<module>:<Resource>`, as pulumi-azure-native 3.29.0 registers each class
# (`@pulumi.type_token(...)` on the class; tests/infra/test_azure_facts.py reads them back from
# the installed provider). Every token the program declares is here.
RESOURCE_GROUP = "azure-native:resources:ResourceGroup"
GENERIC_RESOURCE = "azure-native:resources:Resource"  # any ARM type at any API version
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
USER_ASSIGNED_IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
VIRTUAL_NETWORK = "azure-native:network:VirtualNetwork"
SUBNET = "azure-native:network:Subnet"
NETWORK_SECURITY_GROUP = "azure-native:network:NetworkSecurityGroup"
SECURITY_RULE = "azure-native:network:SecurityRule"
NAT_GATEWAY = "azure-native:network:NatGateway"
PUBLIC_IP_ADDRESS = "azure-native:network:PublicIPAddress"
PRIVATE_ENDPOINT = "azure-native:network:PrivateEndpoint"
PRIVATE_DNS_ZONE_GROUP = "azure-native:network:PrivateDnsZoneGroup"
BASTION_HOST = "azure-native:network:BastionHost"
NETWORK_INTERFACE = "azure-native:network:NetworkInterface"
PRIVATE_DNS_ZONE = "azure-native:privatedns:PrivateZone"
VIRTUAL_NETWORK_LINK = "azure-native:privatedns:VirtualNetworkLink"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
BLOB_CONTAINER = "azure-native:storage:BlobContainer"
BLOB_SERVICE_PROPERTIES = "azure-native:storage:BlobServiceProperties"
FILE_SHARE = "azure-native:storage:FileShare"
MANAGEMENT_POLICY = "azure-native:storage:ManagementPolicy"
REGISTRY = "azure-native:containerregistry:Registry"
TASK = "azure-native:containerregistry:Task"
TASK_RUN = "azure-native:containerregistry:TaskRun"
KEY_VAULT = "azure-native:keyvault:Vault"
LOG_ANALYTICS_WORKSPACE = "azure-native:operationalinsights:Workspace"
APPLICATION_INSIGHTS = "azure-native:applicationinsights:Component"
DIAGNOSTIC_SETTING = "azure-native:monitor:DiagnosticSetting"
ML_WORKSPACE = "azure-native:machinelearningservices:Workspace"
ML_COMPUTE = "azure-native:machinelearningservices:Compute"
ML_DATASTORE = "azure-native:machinelearningservices:Datastore"
ML_ENVIRONMENT_CONTAINER = "azure-native:machinelearningservices:EnvironmentContainer"
ML_ENVIRONMENT_VERSION = "azure-native:machinelearningservices:EnvironmentVersion"
VIRTUAL_MACHINE = "azure-native:compute:VirtualMachine"
VIRTUAL_MACHINE_EXTENSION = "azure-native:compute:VirtualMachineExtension"
# Typed token -> the ARM resource type it declares, for the types the stacks declare through
# GENERIC_RESOURCE instead (the registry: infra/registry.py).
ARM_TYPES = {REGISTRY: "Microsoft.ContainerRegistry/registries"}

# ---- built-in roles --------------------------------------------------------------------------
# Name -> role definition id: the same GUID in every tenant. From the tables of Azure's built-in
# roles (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles, ms.date
# 2026-09-10: Privileged, General, Compute, Containers, AI + machine learning, Storage).
BUILT_IN_ROLES = {
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
    "Role Based Access Control Administrator": "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "AcrPull": "7f951dda-4ed3-4680-a7ca-43fe172d538d",
    "AcrPush": "8311e382-0749-4cb8-b61a-304f252e45ec",
    "AzureML Data Scientist": "f6c7c914-8db3-469d-8ca1-694a8f32e121",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Virtual Machine User Login": "fb879df8-f326-4884-b1cf-06f3ad86be52",
}
ROLE_NAMES = {guid: name for name, guid in BUILT_IN_ROLES.items()}  # role id -> name

# ---- tags --------------------------------------------------------------------------------------
# The tags every taggable resource carries (azdl:tags must hold them; the policy pack checks).
REQUIRED_TAGS = ("environment", "project", "owner", "costCenter")

# ---- values known only after deployment --------------------------------------------------------
# The Pulumi engine's sentinel for an unknown value on the wire (pulumi 3.272.0
# pulumi/runtime/rpc.py `UNKNOWN`; pulumi-policy 1.21.0 proxy.py `UNKNOWN_STRING_VALUE`).
ENGINE_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
# How azdl's plan manifests (azdl/review/manifest.py) write such a value: {"$unknown": [...]}.
UNKNOWN_KEY = "$unknown"


class _Unknown:
    def __repr__(self) -> str:
        return "<unknown until deploy>"


UNKNOWN = _Unknown()  # what `lookup` returns for a value known only after deployment


def lookup(props: Any, *path: str | int, default: Any = None) -> Any:
    """`props[path...]`: `default` where absent, UNKNOWN where known only after deployment
    (pulumi-policy's unknown-checking proxy raises for those; a manifest marks them)."""
    # pulumi_policy loads the Pulumi SDK: imported here so that this module stays pure.
    from pulumi_policy.proxy import UnknownValueError

    value = props
    for step in path:
        container = Sequence if isinstance(step, int) else Mapping
        if not isinstance(value, container) or isinstance(value, str):
            return default
        try:
            value = value[step]
        except UnknownValueError:
            return UNKNOWN
        except (IndexError, KeyError):
            return default
        if isinstance(value, Mapping) and len(value) == 1 and UNKNOWN_KEY in value:
            return UNKNOWN
    return value


# The environment variables pulumi-azure-native reads for the cloud it deploys to (auth.go,
# readAzureEnvironmentFromConfig: ARM_ENVIRONMENT, then AZURE_ENVIRONMENT; ARM_METADATA_HOSTNAME
# for a custom cloud). The program reads them where the provider does (infra/registry.py, the
# registry domain), so the kept plans are keyed on them too (azdl/review/render_cache.py).
PROVIDER_CLOUD_ENV = ("ARM_ENVIRONMENT", "AZURE_ENVIRONMENT", "ARM_METADATA_HOSTNAME")
