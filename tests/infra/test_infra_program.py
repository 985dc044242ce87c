"""The whole program under mocks, for every stack file in stacks/: every resource the
architecture needs exists, with its security settings as Azure sees them (type tokens,
camelCase inputs), role assignments point at the right scopes, and the outputs are set."""

import importlib
import inspect
import json
import re
import uuid
from pathlib import Path

import pytest

from azdl.jobs.stack_outputs import REQUIRED, parse_outputs
from infra.deployer import ASSIGNABLE_ROLES
from infra.exports import DESCRIPTIONS, ONLY_WITH
from infra.naming import RULES
from infra.role_assignments import role_assignment_name
from tests.support.mock_engine import SUBSCRIPTION_ID

AZ = "azure-native:"
ROOT = Path(__file__).resolve().parents[2]


def one(rendering, short_type, name):
    return rendering.get(AZ + short_type, name)


def ids_of(rendering, short_type):
    return {r.name: r.id for r in rendering.of_type(AZ + short_type)}


# ---- outputs -------------------------------------------------------------------------------


def test_outputs_are_complete_and_consistent(rendering, cfg):
    out = rendering.outputs
    assert set(out) == set(DESCRIPTIONS) - set(ONLY_WITH)  # no jump host in the stack files
    assert out["resourceGroupName"] == cfg.names.resource_group
    assert out["location"] == cfg.location
    assert out["subscriptionId"] == SUBSCRIPTION_ID
    assert out["workspaceName"] == cfg.names.workspace
    assert out["clusterName"] == cfg.cluster.name
    assert out["clusterVmSize"] == cfg.cluster.vm_size.name
    assert out["clusterMaxNodes"] == cfg.cluster.max_nodes
    assert out["gpusPerNode"] == cfg.cluster.vm_size.gpus
    assert out["infiniband"] is cfg.cluster.vm_size.infiniband
    identity = one(rendering, "managedidentity:UserAssignedIdentity", "identity")
    assert re.fullmatch(r"[0-9a-f-]{36}", out["clusterIdentityClientId"])
    assert identity.inputs["resourceName"] == cfg.names.cluster_identity
    assert out["registryLoginServer"] == f"{cfg.names.registry}.azurecr.io"
    assert out["dataAccountName"] == cfg.names.data_account
    assert out["dataAccountUrl"] == f"https://{cfg.names.data_account}.blob.core.windows.net/"
    assert out["dataContainerName"] == cfg.storage.data_container
    assert out["dataContainerUrl"] == out["dataAccountUrl"] + cfg.storage.data_container
    assert out["outputsAccountName"] == cfg.names.outputs_account
    assert out["outputsAccountUrl"] == f"https://{cfg.names.outputs_account}.blob.core.windows.net/"
    assert out["outputsContainerName"] == cfg.storage.outputs_container
    if cfg.storage.nfs_share_gib:
        nfs = cfg.names.nfs_account
        host = f"{nfs}.file.core.windows.net"
        assert out["nfsMountTarget"] == f"{host}:/{nfs}/{cfg.names.nfs_share}"
    else:
        assert out["nfsMountTarget"] is None


def test_the_job_tools_find_every_output_they_need(rendering):
    """azdl.jobs.stack_outputs.REQUIRED and the program's exports cannot drift apart: the
    rendered outputs, as `pulumi stack output --json` prints them, pass the job tools' check."""
    exported = json.loads(json.dumps(rendering.outputs))
    missing = [key for key in REQUIRED if exported.get(key) in (None, "", {})]
    assert not missing, f"the program does not export {missing} that the job tools need"
    outputs = parse_outputs(exported, "rendered stack")
    assert outputs.environment("keras") == exported["environments"]["tensorflow"]
    assert outputs.environment("torch") == exported["environments"]["pytorch"]
    assert "nfsMountTarget" in exported  # read as optional: null without a share


def test_the_shipped_example_outputs_have_the_programs_keys(rendering):
    example = json.loads((ROOT / "docs" / "stack-outputs.example.json").read_text())
    example.pop("_comment")
    assert set(example) == set(rendering.outputs)
    assert set(example["images"]) == set(rendering.outputs["images"])
    assert set(example["environments"]) == set(rendering.outputs["environments"])


# ---- structure: components, tags, names -------------------------------------------------------


def test_one_component_per_concern_and_every_resource_parented_to_one(rendering, cfg):
    components = {r.type for r in rendering.resources if not r.custom}
    expected = {"azdl:infra:Network", "azdl:infra:Storage", "azdl:infra:Registry",
                "azdl:infra:Workspace", "azdl:infra:Cluster"}  # fmt: skip
    if cfg.network.private:
        expected.add("azdl:infra:PrivateLink")
    assert expected <= components
    for r in rendering.resources:
        if r.custom and r.type != AZ + "resources:ResourceGroup" and r.type.startswith(AZ):
            assert "azdl:infra:" in r.parent, f"{r.type} {r.name} is not inside a component"


def _takes_tags(token: str) -> bool:
    _, module, cls = token.split(":")
    resource_class = getattr(importlib.import_module(f"pulumi_azure_native.{module}"), cls)
    return "tags" in inspect.signature(resource_class._internal_init).parameters


def test_every_taggable_resource_carries_the_stack_tags(rendering, cfg):
    tagged = 0
    for r in rendering.resources:
        if r.custom and r.type.startswith(AZ) and _takes_tags(r.type):
            assert r.inputs.get("tags") == dict(cfg.tags), f"{r.type} {r.name}"
            tagged += 1
    assert tagged >= 12
    assert {"environment", "project", "owner", "costCenter"} <= set(cfg.tags)


@pytest.mark.parametrize(
    "short_type, key, kind",
    [
        ("storage:StorageAccount", "accountName", "storage account"),
        ("resources:Resource", "resourceName", "container registry"),
        ("keyvault:Vault", "vaultName", "key vault"),
        ("machinelearningservices:Compute", "computeName", "compute"),
        ("machinelearningservices:Workspace", "workspaceName", "machine learning workspace"),
        ("resources:ResourceGroup", "resourceGroupName", "resource group"),
    ],
)
def test_names_follow_azure_rules(rendering, short_type, key, kind):
    resources = rendering.of_type(AZ + short_type)
    assert resources
    pattern, rule = RULES[kind]
    for r in resources:
        assert pattern.match(r.inputs[key]), f"{r.inputs[key]!r}: {rule}"


# ---- network -------------------------------------------------------------------------------


def test_vnet_and_subnets(rendering, cfg):
    vnet = one(rendering, "network:VirtualNetwork", "vnet")
    assert vnet.inputs["addressSpace"]["addressPrefixes"] == [str(cfg.network.address_space)]
    assert "subnets" not in vnet.inputs  # standalone Subnet resources only
    training = one(rendering, "network:Subnet", "training-subnet")
    endpoints = one(rendering, "network:Subnet", "endpoint-subnet")
    assert training.inputs["addressPrefix"] == str(cfg.network.training_subnet)
    assert endpoints.inputs["addressPrefix"] == str(cfg.network.endpoint_subnet)
    assert training.inputs["virtualNetworkName"] == cfg.names.virtual_network
    nsg = one(rendering, "network:NetworkSecurityGroup", "training-nsg")
    assert training.inputs["networkSecurityGroup"]["id"] == nsg.id
    services = {s["service"] for s in training.inputs.get("serviceEndpoints", [])}
    if cfg.network.private:
        assert services == set()
        assert endpoints.inputs["privateEndpointNetworkPolicies"] == "Disabled"
    else:
        assert {"Microsoft.Storage", "Microsoft.KeyVault"} <= services


def test_nsg_admits_only_azure_ml_inbound(rendering, cfg):
    rules = one(rendering, "network:NetworkSecurityGroup", "training-nsg").inputs["securityRules"]
    inbound_allows = {
        (r["sourceAddressPrefix"], tuple(r["destinationPortRanges"]))
        for r in rules
        if r["direction"] == "Inbound" and r["access"] == "Allow"
    }
    assert inbound_allows == {
        ("BatchNodeManagement", ("29876-29877",)),
        ("AzureMachineLearning", ("44224",)),
    }
    deny = [r for r in rules if r["direction"] == "Inbound" and r["access"] == "Deny"]
    assert [(r["sourceAddressPrefix"], r["destinationPortRange"]) for r in deny] == [
        ("Internet", "*")
    ]
    for r in rules:
        # Azure takes "*" only in the singular fields (SecurityRuleInvalidPortRange otherwise)
        assert "*" not in r.get("destinationPortRanges", []), r["name"]
        assert "*" not in r.get("sourcePortRanges", []), r["name"]
        assert r["sourcePortRange"] == "*", r["name"]
    # Outbound: tests/infra/test_infra_access.py checks it against Azure ML's documented list.
    assert len({r["name"] for r in rules}) == len(rules)
    for direction in ("Inbound", "Outbound"):
        priorities = [r["priority"] for r in rules if r["direction"] == direction]
        assert len(set(priorities)) == len(priorities)


def test_nodes_without_public_ip_get_a_nat_gateway(rendering, cfg):
    training = one(rendering, "network:Subnet", "training-subnet")
    nat = rendering.of_type(AZ + "network:NatGateway")
    if cfg.cluster.node_public_ip:
        assert nat == [] and training.inputs.get("natGateway") is None
    else:
        assert training.inputs["natGateway"]["id"] == nat[0].id


# ---- storage -------------------------------------------------------------------------------


def test_storage_accounts_kinds_and_security(rendering, cfg):
    accounts = {r.name: r.inputs for r in rendering.of_type(AZ + "storage:StorageAccount")}
    expected = {
        "data": ("BlockBlobStorage", "Premium_LRS"),
        # zone-redundant in prod (tests/infra/test_hardening.py)
        "outputs": ("StorageV2", "Standard_ZRS" if cfg.environment == "prod" else "Standard_LRS"),
    }
    if cfg.storage.nfs_share_gib:
        expected["nfs"] = ("FileStorage", "Premium_LRS")
    assert {n: (a["kind"], a["sku"]["name"]) for n, a in accounts.items()} == expected
    training_subnet_id = one(rendering, "network:Subnet", "training-subnet").id
    for name, a in accounts.items():
        # The workspace's storage (outputs) in its GA configuration: tests/infra/
        # test_infra_access.py. The data accounts never need shared keys or public access.
        workspace_ga = name == "outputs" and cfg.storage.workspace_storage == "firewall"
        shared_keys = name == "outputs" and cfg.storage.workspace_storage != "strict"
        assert a["minimumTlsVersion"] == "TLS1_2", name
        assert a["allowBlobPublicAccess"] is False, name
        assert a["allowSharedKeyAccess"] is shared_keys, name
        assert a["enableHttpsTrafficOnly"] is (name != "nfs"), name  # NFS requires it off
        rules = a["networkRuleSet"]
        assert rules["defaultAction"] == "Deny", name
        if cfg.network.private:
            assert a["publicNetworkAccess"] == ("Enabled" if workspace_ga else "Disabled"), name
            assert rules.get("virtualNetworkRules", []) == [], name
        else:
            assert a["publicNetworkAccess"] == "Enabled", name
            assert [r["virtualNetworkResourceId"] for r in rules["virtualNetworkRules"]] == [
                training_subnet_id
            ], name


def test_data_lives_in_its_own_group_and_containers_are_private(rendering, cfg):
    data = one(rendering, "storage:StorageAccount", "data")
    outputs = one(rendering, "storage:StorageAccount", "outputs")
    assert data.inputs["resourceGroupName"] == cfg.names.data_resource_group
    # not in the platform group: deleting that group would delete it, retained or not
    assert outputs.inputs["resourceGroupName"] == cfg.names.data_resource_group
    for name, account in (("data-container", data), ("outputs-container", outputs)):
        container = one(rendering, "storage:BlobContainer", name)
        assert container.inputs["publicAccess"] == "None"
        assert container.inputs["accountName"] == account.inputs["accountName"]
    if cfg.storage.nfs_share_gib:
        share = one(rendering, "storage:FileShare", "nfs-share")
        assert share.inputs["enabledProtocols"] == "NFS"
        assert share.inputs["shareQuota"] == cfg.storage.nfs_share_gib
        assert share.inputs["accountName"] == cfg.names.nfs_account


def test_data_resources_survive_destroy_as_the_stack_says(rendering, cfg):
    group = one(rendering, "resources:ResourceGroup", "data-resource-group")
    strongest = max(cfg.storage.data_protection, cfg.storage.outputs_protection,
                    key=("none", "retain", "protect").index)  # fmt: skip
    assert (group.protect, group.retain_on_delete) == (
        strongest == "protect",
        strongest == "retain",
    )
    kept = [
        one(rendering, "storage:StorageAccount", "data"),
        one(rendering, "storage:BlobContainer", "data-container"),
    ]
    if cfg.storage.nfs_share_gib:
        kept += [
            one(rendering, "storage:StorageAccount", "nfs"),
            one(rendering, "storage:FileShare", "nfs-share"),
        ]
    mode = cfg.storage.data_protection
    for r in kept:
        assert (r.protect, r.retain_on_delete) == (mode == "protect", mode == "retain"), r.name
    # The outputs account has its own setting (test_outputs_account_and_container_follow_…).


# ---- registry and workspace ------------------------------------------------------------------


def test_registry(rendering, cfg):
    # the generic ARM resource at the API version with the tasks bypass (infra/registry.py)
    registry = one(rendering, "resources:Resource", "registry").inputs
    assert (registry["resourceProviderNamespace"], registry["resourceType"]) == (
        "Microsoft.ContainerRegistry",
        "registries",
    )
    assert registry["apiVersion"] >= "2025-05-01-preview"  # first with the bypass for tasks
    props = registry["properties"]
    assert props["adminUserEnabled"] is False
    assert props["networkRuleBypassAllowedForTasks"] is True
    assert registry["sku"]["name"] == cfg.registry_sku
    if cfg.network.private:
        assert registry["sku"]["name"] == "Premium"
        assert props["publicNetworkAccess"] == "Disabled"


def test_workspace_and_its_dependencies(rendering, cfg):
    ws = one(rendering, "machinelearningservices:Workspace", "workspace").inputs
    assert ws["identity"]["type"] == "SystemAssigned"
    assert ws["keyVault"] == one(rendering, "keyvault:Vault", "key-vault").id
    assert (
        ws["applicationInsights"]
        == one(rendering, "applicationinsights:Component", "app-insights").id
    )
    assert ws["storageAccount"] == one(rendering, "storage:StorageAccount", "outputs").id
    assert ws["containerRegistry"] == one(rendering, "resources:Resource", "registry").id
    assert ws["systemDatastoresAuthMode"] == "Identity"  # the storage has no shared keys
    appi = one(rendering, "applicationinsights:Component", "app-insights").inputs
    assert appi["workspaceResourceId"] == one(rendering, "operationalinsights:Workspace", "logs").id
    vault = one(rendering, "keyvault:Vault", "key-vault").inputs["properties"]
    assert vault["enableRbacAuthorization"] is True
    assert vault["tenantId"]
    assert vault["networkAcls"]["defaultAction"] == "Deny"
    if cfg.network.private:
        assert ws["publicNetworkAccess"] == "Disabled"
        assert vault["publicNetworkAccess"] == "Disabled"
        assert ws["imageBuildCompute"] == cfg.names.image_build_compute
        computes = {
            c.inputs["computeName"]
            for c in rendering.of_type(AZ + "machinelearningservices:Compute")
        }
        assert cfg.names.image_build_compute in computes
    else:
        assert "imageBuildCompute" not in ws


def test_identity_based_datastores_for_training_data_and_outputs(rendering, cfg):
    workspace = one(rendering, "machinelearningservices:Workspace", "workspace")
    stores = {
        "data-datastore": (rendering.outputs["dataDatastore"], cfg.names.data_resource_group,
                           cfg.names.data_account, cfg.storage.data_container),
        "outputs-datastore": (rendering.outputs["outputsDatastore"], cfg.names.data_resource_group,
                              cfg.names.outputs_account, cfg.storage.outputs_container),
    }  # fmt: skip
    found = {d.name: d for d in rendering.of_type(AZ + "machinelearningservices:Datastore")}
    assert set(found) == set(stores)
    for logical, (name, group, account, container) in stores.items():
        store = found[logical]
        assert re.fullmatch(r"[a-z0-9_]+", name)  # Azure ML's datastore name rule
        assert store.inputs["name"] == name
        assert store.inputs["workspaceName"] == cfg.names.workspace
        assert store.parent == workspace.parent  # inside the Workspace component
        props = store.inputs["properties"]
        assert props["datastoreType"] == "AzureBlob"
        assert (props["accountName"], props["containerName"]) == (account, container)
        assert props["resourceGroup"] == group
        # no stored secret: jobs use their own identity, the studio the user's
        assert props["credentials"] == {"credentialsType": "None"}
        assert props["serviceDataAccessAuthIdentity"] == "None"
        assert store.inputs["skipValidation"] is True  # deploying needs no data-plane role
        assert store.id.endswith(f"/workspaces/{cfg.names.workspace}/datastores/{name}")
    assert stores["data-datastore"][0] != stores["outputs-datastore"][0]


# ---- cluster -----------------------------------------------------------------------------------


def test_gpu_cluster_settings(rendering, cfg):
    compute = one(rendering, "machinelearningservices:Compute", "compute").inputs
    identity = one(rendering, "managedidentity:UserAssignedIdentity", "identity")
    assert compute["computeName"] == cfg.cluster.name
    assert compute["workspaceName"] == cfg.names.workspace
    assert compute["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [identity.id]}
    aml = compute["properties"]
    assert aml["computeType"] == "AmlCompute"
    props = aml["properties"]
    assert props["vmSize"] == cfg.cluster.vm_size.name
    assert props["vmPriority"] == cfg.cluster.priority
    scale = props["scaleSettings"]
    assert (scale["minNodeCount"], scale["maxNodeCount"]) == (
        cfg.cluster.min_nodes,
        cfg.cluster.max_nodes,
    )
    assert (
        scale["nodeIdleTimeBeforeScaleDown"] == f"PT{cfg.cluster.idle_seconds_before_scale_down}S"
    )
    assert props["subnet"]["id"] == one(rendering, "network:Subnet", "training-subnet").id
    assert props["remoteLoginPortPublicAccess"] == "Disabled"
    assert props["enableNodePublicIp"] is cfg.cluster.node_public_ip
    if cfg.environment == "prod":
        assert props["enableNodePublicIp"] is False


def test_cluster_identity_has_least_privilege_roles_on_the_right_scopes(rendering, cfg):
    identity = one(rendering, "managedidentity:UserAssignedIdentity", "identity")
    assert identity.state["principalId"]
    registry = one(rendering, "resources:Resource", "registry").id
    container = one(rendering, "storage:BlobContainer", "data-container").id
    outputs = one(rendering, "storage:StorageAccount", "outputs").id
    expected = {
        ("AcrPull", registry),
        ("Storage Blob Data Reader", container),
        ("Storage Blob Data Contributor", outputs),
    }
    assignments = [
        a
        for a in rendering.of_type(AZ + "authorization:RoleAssignment")
        if a.inputs["principalId"] == identity.state["principalId"]
    ]
    prefix = f"/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Authorization/roleDefinitions/"
    by_id = {guid: role for role, guid in ASSIGNABLE_ROLES.items()}
    found = set()
    for a in assignments:
        definition = a.inputs["roleDefinitionId"]
        assert definition.startswith(prefix)
        found.add((by_id[definition.removeprefix(prefix)], a.inputs["scope"]))
        assert a.inputs["principalType"] == "ServicePrincipal"
        assert a.inputs["roleAssignmentName"] == role_assignment_name(
            a.inputs["scope"], a.inputs["principalId"], definition
        )
        assert a.delete_before_replace  # Azure refuses two identical grants side by side
    assert found == expected
    assert len({a.inputs["roleAssignmentName"] for a in assignments}) == len(assignments)


def test_image_build_compute_has_its_own_identity_with_only_acr_push(rendering, cfg):
    """The workspace builds environment images on it and pushes them to its registry with the
    compute's identity: AcrPush (push and pull), and none of the cluster's data roles."""
    if not cfg.network.private:
        assert rendering.of_type(AZ + "managedidentity:UserAssignedIdentity") == [
            one(rendering, "managedidentity:UserAssignedIdentity", "identity")
        ]
        return
    builder = one(rendering, "managedidentity:UserAssignedIdentity", "image-build-identity")
    assert builder.inputs["resourceName"] == cfg.names.image_build_identity
    compute = one(rendering, "machinelearningservices:Compute", "image-build").inputs
    assert compute["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [builder.id]}
    grants = [
        a for a in rendering.of_type(AZ + "authorization:RoleAssignment")
        if a.inputs["principalId"] == builder.state["principalId"]
    ]  # fmt: skip
    registry = one(rendering, "resources:Resource", "registry").id
    prefix = f"/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Authorization/roleDefinitions/"
    assert [(a.inputs["roleDefinitionId"], a.inputs["scope"]) for a in grants] == [
        (prefix + ASSIGNABLE_ROLES["AcrPush"], registry)
    ]
    assert grants[0].delete_before_replace


def test_outputs_account_and_container_follow_outputs_protection(rendering, cfg):
    expected = {"protect": (True, False), "retain": (False, True), "none": (False, False)}
    for short, name in (("storage:StorageAccount", "outputs"),
                        ("storage:BlobContainer", "outputs-container")):  # fmt: skip
        r = one(rendering, short, name)
        assert (r.protect, r.retain_on_delete) == expected[cfg.storage.outputs_protection], name
    if cfg.environment == "prod":
        assert cfg.storage.outputs_protection == "protect"


def test_training_subnet_keeps_default_outbound_only_for_nodes_with_public_ips(rendering, cfg):
    subnet = one(rendering, "network:Subnet", "training-subnet").inputs
    assert subnet["defaultOutboundAccess"] is cfg.cluster.node_public_ip
    if not cfg.cluster.node_public_ip:  # a private subnet: outbound through the NAT gateway
        assert subnet["natGateway"]["id"] == one(rendering, "network:NatGateway", "nat").id


GLOBAL_NAMES = {
    ("storage:StorageAccount", "data"): "accountName",
    ("storage:StorageAccount", "outputs"): "accountName",
    ("resources:Resource", "registry"): "resourceName",
}  # the Key Vault's name ends in the deployment id instead (tests/infra/test_redeploy.py)


def global_names(rendering) -> dict:
    return {k: one(rendering, *k).inputs[field] for k, field in GLOBAL_NAMES.items()}


@pytest.mark.parametrize("stack_file", [ROOT / "stacks" / "Pulumi.dev.yaml"], indirect=True)
def test_global_names_differ_between_subscriptions(rendering, stack_file):
    """The same stack file rendered for another subscription asks Azure for other global
    names (for the same subscription it asks for the same ones: test_rendering_is_deterministic).
    One stack suffices: the names come from the same code for every stack."""
    from infra.config import read_stack_file, stack_name_of
    from tests.support.mock_engine import render

    config, stack = read_stack_file(stack_file), stack_name_of(stack_file)
    other = render(config, stack, subscription_id="11111111-2222-3333-4444-555555555555")
    mine, theirs = global_names(rendering), global_names(other)
    assert all(mine[k] != theirs[k] for k in GLOBAL_NAMES), (mine, theirs)
    group = ("resources:ResourceGroup", "resource-group")
    assert one(other, *group).inputs == one(rendering, *group).inputs  # not a global name


def test_role_assignment_names_are_deterministic_guids_of_scope_principal_and_role():
    scope = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerRegistry/registries/r"
    definitions = "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/"
    reader = definitions + ASSIGNABLE_ROLES["AcrPull"]
    first = role_assignment_name(scope, "principal-1", reader)
    assert uuid.UUID(first)
    assert first == role_assignment_name(scope, "principal-1", reader)
    assert first == role_assignment_name(
        scope.upper(), "PRINCIPAL-1", reader
    )  # ARM ids ignore case
    others = {
        role_assignment_name(scope + "2", "principal-1", reader),  # another scope
        role_assignment_name(scope, "principal-2", reader),  # another principal
        role_assignment_name(scope, "principal-1", reader.replace("7f951dda", "8311e382")),
    }
    assert first not in others and len(others) == 3


# ---- private link (private stacks) ------------------------------------------------------------


def test_private_endpoints_and_dns_zones(rendering, cfg):
    endpoints = rendering.of_type(AZ + "network:PrivateEndpoint")
    if not cfg.network.private:
        assert endpoints == [] and rendering.of_type(AZ + "privatedns:PrivateZone") == []
        return
    subnet = one(rendering, "network:Subnet", "endpoint-subnet").id
    targets = {
        "workspace-pe": (one(rendering, "machinelearningservices:Workspace", "workspace").id,
                         "amlworkspace"),
        "keyvault-pe": (one(rendering, "keyvault:Vault", "key-vault").id, "vault"),
        "registry-pe": (one(rendering, "resources:Resource", "registry").id, "registry"),
        "data-blob-pe": (one(rendering, "storage:StorageAccount", "data").id, "blob"),
        "outputs-blob-pe": (one(rendering, "storage:StorageAccount", "outputs").id, "blob"),
        "outputs-file-pe": (one(rendering, "storage:StorageAccount", "outputs").id, "file"),
    }  # fmt: skip
    if cfg.storage.nfs_share_gib:
        targets["nfs-file-pe"] = (one(rendering, "storage:StorageAccount", "nfs").id, "file")
    got = {}
    for e in endpoints:
        assert e.inputs["subnet"]["id"] == subnet
        (connection,) = e.inputs["privateLinkServiceConnections"]
        got[e.name] = (connection["privateLinkServiceId"], connection["groupIds"][0])
    assert got == targets

    zones = ids_of(rendering, "privatedns:PrivateZone")
    assert set(zones) == {
        "privatelink.api.azureml.ms", "privatelink.notebooks.azure.net",
        "privatelink.blob.core.windows.net", "privatelink.file.core.windows.net",
        "privatelink.vaultcore.azure.net", "privatelink.azurecr.io",
    }  # fmt: skip
    vnet = one(rendering, "network:VirtualNetwork", "vnet").id
    links = rendering.of_type(AZ + "privatedns:VirtualNetworkLink")
    assert {link.inputs["privateZoneName"] for link in links} == set(zones)
    assert all(link.inputs["virtualNetwork"]["id"] == vnet for link in links)
    groups = {g.name: g.inputs for g in rendering.of_type(AZ + "network:PrivateDnsZoneGroup")}
    assert len(groups) == len(endpoints)
    ws_zones = {c["privateDnsZoneId"] for c in groups["workspace-dns"]["privateDnsZoneConfigs"]}
    assert ws_zones == {
        zones["privatelink.api.azureml.ms"],
        zones["privatelink.notebooks.azure.net"],
    }
    data_zones = [c["privateDnsZoneId"] for c in groups["data-blob-dns"]["privateDnsZoneConfigs"]]
    assert data_zones == [zones["privatelink.blob.core.windows.net"]]


# What the mocked ACR answers differently by the order of a render's two concurrent uploads:
# the path each upload gets (numbered as asked: in the relative path and in the upload URL) and
# the digest built from it. The program's part is the same whichever image asks first.
_UPLOAD_ORDER = (
    (re.compile(r"(source/(?:mock/)?[^/\"]+/)\d{4}(\.tar\.gz)"), r"\1N\2"),
    (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:D"),
)


def _but_upload_order(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    for pattern, replacement in _UPLOAD_ORDER:
        text = pattern.sub(replacement, text)
    return text


@pytest.mark.slow  # a second full rendering: ~3 s
def test_rendering_is_deterministic(rendering, stack_file):
    from tests.support.mock_engine import render_stack_file

    again = render_stack_file(stack_file)
    assert _but_upload_order(again.outputs) == _but_upload_order(rendering.outputs)
    assert _but_upload_order([(r.type, r.name, r.inputs) for r in again.resources]) == (
        _but_upload_order([(r.type, r.name, r.inputs) for r in rendering.resources])
    )


# ---- variants the shipped stacks don't cover ----------------------------------------------------


@pytest.fixture(scope="module")
def variant():
    """The dev stack with data retained, no NFS share, private endpoints and nodes without
    public IPs."""
    from infra.config import read_stack_file
    from tests.support.mock_engine import render

    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev.yaml")
    config["azdl:storage"] = {
        **config["azdl:storage"],
        "nfsShareGiB": 0,
        "dataProtection": "retain",
    }
    # Nodes without public IPs need the workspace's private endpoint: private networking.
    config["azdl:cluster"] = {**config["azdl:cluster"], "nodePublicIp": False}
    config["azdl:network"] = {
        **config["azdl:network"],
        "mode": "privateEndpoints",
        "publicNetworkAccess": False,
        "allowedIpRanges": [],
    }
    config["azdl:registry"] = {"sku": "Premium"}
    return render(config, stack="dev")


def test_variant_without_nfs_retains_data_and_routes_through_nat(variant):
    assert variant.outputs["nfsMountTarget"] is None
    assert variant.of_type(AZ + "storage:FileShare") == []
    assert {r.name for r in variant.of_type(AZ + "storage:StorageAccount")} == {"data", "outputs"}
    for short, name in [("resources:ResourceGroup", "data-resource-group"),
                        ("storage:StorageAccount", "data"),
                        ("storage:BlobContainer", "data-container")]:  # fmt: skip
        r = one(variant, short, name)
        assert (r.protect, r.retain_on_delete) == (False, True), name
    nat = one(variant, "network:NatGateway", "nat")
    assert one(variant, "network:Subnet", "training-subnet").inputs["natGateway"]["id"] == nat.id
    compute = one(variant, "machinelearningservices:Compute", "compute").inputs
    assert compute["properties"]["properties"]["enableNodePublicIp"] is False
