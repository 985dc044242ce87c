"""Operators, the way into a private stack, bring-your-own network, outbound rules and the
workspace storage's networking: config validation (clear errors naming the key, before any
resource) and the rendered plans, checked against what Azure documents."""

import fnmatch
import json
import re
from pathlib import Path

import pulumi
import pytest

from infra import program
from infra.config import ConfigError, load_config, read_stack_file
from infra.deployer import ASSIGNABLE_ROLES
from infra.network import security_rules
from infra.role_assignments import role_assignment_name
from tests.infra.documented_roles import DOCUMENTED_ROLE_IDS
from tests.support import renderings
from tests.support.mock_engine import PREVIEW_CREATE, SUBSCRIPTION_ID, TENANT_ID, AzureMocks
from tests.support.renderings import (
    CENTRAL,
    HUB,
    JUMP_HOST,
    LANDING_ZONE_NETWORK,
    LZ_VNET,
    OPERATOR_GROUP,
    OPERATOR_USER,
    OPERATORS,
    SSH_KEY,
    STACKS,
    stack,
)

AZ = "azure-native:"

# Outbound a compute cluster in a locked-down VNet needs, as (service tag, protocol, ports), per
# rule: Azure ML's documented list (transcribed with its pages' dates in
# tests/infra/documented_outbound.py and held against infra/network.py by
# tests/infra/test_outbound_documented.py), grouped as the NSG's rules group it.
DOCUMENTED_OUTBOUND = {
    ("AzureMachineLearning", "Tcp", ("443", "8787", "18881")),
    ("AzureMachineLearning", "Udp", ("5831",)),
    ("BatchNodeManagement.{region}", "*", ("443",)),
    ("Storage.{region}", "Tcp", ("443", "445")),
    ("AzureActiveDirectory", "Tcp", ("80", "443")),
    ("AzureResourceManager", "Tcp", ("443",)),
    ("AzureFrontDoor.FrontEnd", "Tcp", ("443",)),
    ("AzureFrontDoor.FirstParty", "Tcp", ("443",)),
    ("MicrosoftContainerRegistry.{region}", "Tcp", ("443",)),
    ("AzureContainerRegistry.{region}", "Tcp", ("443",)),
    ("AzureMonitor", "Tcp", ("443",)),
    ("AzureKeyVault.{region}", "Tcp", ("443",)),
}


def with_network(name: str, **network) -> dict:
    config = stack(name)
    config["azdl:network"] = {**config["azdl:network"], **network}
    return config


def jump(**changes) -> dict:
    """The prod stack with JUMP_HOST's settings changed."""
    return stack("prod", access={"jumpHost": {**JUMP_HOST["jumpHost"], **changes}})


def error_for(config: dict, stack_name: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(config, stack=stack_name)
    return str(info.value)


# ---- config validation ---------------------------------------------------------------------

BAD = [
    # operators
    (stack("dev", operators={"objectId": OPERATOR_USER}), "dev",
     ["azdl:operators", "a list of {objectId"]),
    (stack("dev", operators=[{"objectId": "alice@contoso.com", "principalType": "User"}]), "dev",
     ["azdl:operators[0].objectId", "'alice@contoso.com'", "Microsoft Entra object id", "GUID"]),
    (stack("dev", operators=[{"objectId": OPERATOR_USER, "principalType": "ServicePrincipal"}]),
     "dev", ["azdl:operators[0].principalType", "'ServicePrincipal'", "User, Group"]),
    (stack("dev", operators=[{"objectId": OPERATOR_USER}]), "dev",
     ["azdl:operators[0].principalType is required"]),
    (stack("dev", operators=[*OPERATORS, {"objectId": OPERATOR_USER.upper(),
                                          "principalType": "User"}]),
     "dev", ["azdl:operators[2].objectId", "each operator once"]),
    (stack("dev", operators=[{"objectId": OPERATOR_USER, "principalType": "User", "role": "x"}]),
     "dev", ["azdl:operators[0].role", "unknown key", "objectId, principalType, name"]),
    # an operator's address on a dev firewall: a single address is fine, /31-/32 and private not
    (with_network("dev", allowedIpRanges=["40.74.10.7/32"]), "dev",
     ["azdl:network.allowedIpRanges[0]", "'40.74.10.7/32'", "without a prefix"]),
    (with_network("dev", allowedIpRanges=["192.168.1.10"]), "dev",
     ["azdl:network.allowedIpRanges[0]", "'192.168.1.10'", "public IPv4"]),
    (with_network("dev", allowedIpRanges=["my-laptop"]), "dev",
     ["azdl:network.allowedIpRanges[0]", "'my-laptop'", "public IPv4"]),
    # outbound
    (with_network("dev", outbound="none"), "dev",
     ["azdl:network.outbound", "'none'", "restricted, open"]),
    (with_network("prod", outbound="open"), "prod",
     ["azdl:network.outbound", "'open'", "prod stack must set restricted"]),
    # workspace storage
    (stack("dev", storage={"workspaceStorage": "closed"}), "dev",
     ["azdl:storage.workspaceStorage", "'closed'", "firewall, private, strict"]),
    (stack("dev", storage={"workspaceStorage": "private"}), "dev",
     ["azdl:storage.workspaceStorage", "'private'", "with network.mode serviceEndpoints"]),
    # bring-your-own network
    (with_network("prod", existing={"trainingSubnetId": "training"}), "prod",
     ["azdl:network.addressSpace", "not set with network.existing"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "outbound": "restricted"}), "prod",
     ["azdl:network.outbound", "not set with network.existing", "NSG"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "existing": {
        "trainingSubnetId": f"{LZ_VNET}/subnets/aml-training",
        "privateEndpointSubnetId": "endpoints"}}), "prod",
     ["azdl:network.existing.privateEndpointSubnetId", "'endpoints'", "a subnet resource id",
      "/subnets/<subnet>"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "existing": {
        "trainingSubnetId": f"{LZ_VNET}/subnets/aml-training",
        "privateEndpointSubnetId": f"{LZ_VNET}x/subnets/endpoints"}}), "prod",
     ["azdl:network.existing.privateEndpointSubnetId", "a subnet of the training subnet's VNet"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "existing": {
        "trainingSubnetId": f"{LZ_VNET}/subnets/aml-training"}}), "prod",
     ["azdl:network.existing.privateEndpointSubnetId is required"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "privateDnsZoneIds": {
        "privatelink.azureml.ms": f"{CENTRAL}/privateDnsZones/privatelink.azureml.ms"}}), "prod",
     ["azdl:network.privateDnsZoneIds.privatelink.azureml.ms", "privatelink.api.azureml.ms"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "privateDnsZoneIds": {
        "privatelink.azurecr.io": f"{CENTRAL}/privateDnsZones/privatelink.blob.core.windows.net"}}),
     "prod", ["azdl:network.privateDnsZoneIds.privatelink.azurecr.io",
              "a private DNS zone named privatelink.azurecr.io"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "dnsZoneVnetLinks": ["hub"]}), "prod",
     ["azdl:network.dnsZoneVnetLinks[0]", "'hub'", "a virtual network resource id"]),
    (stack("prod", network={**LANDING_ZONE_NETWORK, "dnsZoneVnetLinks": [LZ_VNET]}), "prod",
     ["azdl:network.dnsZoneVnetLinks[0]", "not the stack's own VNet"]),
    (with_network("dev", dnsZoneVnetLinks=[HUB.format(sub=SUBSCRIPTION_ID)]), "dev",
     ["azdl:network.dnsZoneVnetLinks", "only with network.mode privateEndpoints"]),
    # the jump host
    (jump(bastionSubnet="10.50.17.0/27"),
     "prod", ["azdl:access.jumpHost.bastionSubnet", "'10.50.17.0/27'", "at least /26"]),
    (jump(jumpHostSubnet="10.50.0.0/29"),
     "prod", ["azdl:access.jumpHost.jumpHostSubnet", "does not overlap network.trainingSubnet"]),
    (jump(bastionSubnet="10.60.0.0/26"),
     "prod", ["azdl:access.jumpHost.bastionSubnet", "inside network.addressSpace 10.50.0.0/16"]),
    (stack("prod", access={"jumpHost": {**JUMP_HOST["jumpHost"], "sshPublicKey":
                                        "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1r"}}),
     "prod", ["azdl:access.jumpHost.sshPublicKey", "PUBLIC key", "<a private key: not shown>"]),
    (jump(sshPublicKey="hunter2"),
     "prod", ["azdl:access.jumpHost.sshPublicKey", "ssh-rsa or ssh-ed25519"]),
    (jump(adminUsername="admin"),
     "prod", ["azdl:access.jumpHost.adminUsername", "'admin'", "does not reserve"]),
    (jump(bastionSku="Developer"),
     "prod", ["azdl:access.jumpHost.bastionSku", "'Developer'", "Basic, Standard"]),
    (stack("prod", access={"jumpHost": {"bastionSubnet": "10.50.17.0/26",
                                        "jumpHostSubnet": "10.50.18.0/29"}}),
     "prod", ["azdl:access.jumpHost.sshPublicKey is required"]),
    (stack("prod", access={"jumphost": {}}), "prod", ["azdl:access.jumphost", "unknown key"]),
    (stack("dev", access=JUMP_HOST), "dev",
     ["azdl:access.jumpHost", "only with network.mode privateEndpoints", "allowedIpRanges"]),
    (stack("prod", network=LANDING_ZONE_NETWORK, access=JUMP_HOST), "prod",
     ["azdl:access.jumpHost", "not with network.existing"]),
]  # fmt: skip


@pytest.mark.parametrize("config, stack_name, expected", BAD)
def test_bad_access_and_network_settings_name_key_value_and_what_is_allowed(
    config, stack_name, expected
):
    message = error_for(config, stack_name)
    for fragment in expected:
        assert fragment in message, message


def test_bad_settings_stop_the_program_before_any_resource():
    """Through the program's own entry path (read_config, then declare) under mocks."""
    keys = ("azdl:operators[0].objectId", "azdl:network.outbound", "azdl:access.jumpHost")
    picked = [next(case for case in BAD if case[2][0] == key) for key in keys]
    for config, stack_name, expected in picked:
        mocks = AzureMocks(mode=PREVIEW_CREATE)
        pulumi.runtime.set_mocks(mocks, project="azdl", stack=stack_name, preview=True)
        pulumi.runtime.set_all_config(
            {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
        )

        @pulumi.runtime.test
        def run():
            program.declare(program.read_config())

        with pytest.raises(ConfigError, match=re.escape(expected[0])):
            run()
        assert mocks.resources == []


def test_good_access_settings_and_their_defaults():
    cfg = load_config(stack("prod", operators=OPERATORS, access=JUMP_HOST), stack="prod")
    assert [(o.object_id, o.principal_type) for o in cfg.operators] == [
        (OPERATOR_USER, "User"), (OPERATOR_GROUP, "Group")]  # fmt: skip
    jump = cfg.jump_host
    assert (jump.vm_size, jump.admin_username, jump.bastion_sku) == (
        "Standard_B2s", "azdladmin", "Standard")  # fmt: skip
    assert cfg.network.outbound == "restricted" and cfg.storage.workspace_storage == "firewall"
    dev = load_config(with_network("dev", allowedIpRanges=["40.74.10.7", "40.74.12.0/30"]),
                      stack="dev")  # fmt: skip
    assert dev.network.allowed_ip_ranges == ("40.74.10.7", "40.74.12.0/30")
    lz = load_config(stack("prod", network=LANDING_ZONE_NETWORK), stack="prod")
    assert lz.network.existing.vnet_id == LZ_VNET and lz.network.address_space is None


# ---- roles ---------------------------------------------------------------------------------


def test_role_ids_are_azures_documented_built_in_roles():
    for role, guid in ASSIGNABLE_ROLES.items():
        assert DOCUMENTED_ROLE_IDS[role] == guid, role


# ---- plans ---------------------------------------------------------------------------------


@pytest.fixture
def prod_with_jump_host():
    return renderings.prod_with_jump_host()


@pytest.fixture
def landing_zone():
    return renderings.landing_zone()


def one(rendering, short_type, name):
    return rendering.get(AZ + short_type, name)


def role_of(assignment) -> str:
    guid = assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
    return {v: k for k, v in DOCUMENTED_ROLE_IDS.items()}[guid]


def operator_grants(rendering) -> set[tuple[str, str, str, str]]:
    """(principal, principal type, documented role name, scope) of each operator grant."""
    return {
        (r.inputs["principalId"], r.inputs["principalType"], role_of(r), r.inputs["scope"])
        for r in rendering.of_type(AZ + "authorization:RoleAssignment")
        if r.inputs["principalType"] in ("User", "Group")
    }


def test_operators_get_exactly_the_roles_the_operator_commands_need(prod_with_jump_host):
    r = prod_with_jump_host
    data_container = one(r, "storage:BlobContainer", "data-container").id
    outputs = one(r, "storage:StorageAccount", "outputs").id
    workspace = one(r, "machinelearningservices:Workspace", "workspace").id
    vm = one(r, "compute:VirtualMachine", "jump-host").id
    nic = one(r, "network:NetworkInterface", "jump-host-nic").id
    bastion = one(r, "network:BastionHost", "bastion").id
    expected = set()
    for object_id, kind in ((OPERATOR_USER, "User"), (OPERATOR_GROUP, "Group")):
        expected |= {
            (object_id, kind, "Storage Blob Data Contributor", data_container),  # data stage
            (object_id, kind, "AzureML Data Scientist", workspace),  # submit, bench
            # the workspace's default storage, reached through identity-based datastores:
            # code upload (submit --script), job logs, checkpoints (how-to-disable-local-auth-
            # storage: Storage Blob Data Contributor for users of the default datastores)
            (object_id, kind, "Storage Blob Data Contributor", outputs),
            (object_id, kind, "Virtual Machine User Login", vm),  # Entra SSH login
            (object_id, kind, "Reader", vm),  # Bastion's documented prerequisites
            (object_id, kind, "Reader", nic),
            (object_id, kind, "Reader", bastion),
        }
    assert operator_grants(r) == expected
    for a in r.of_type(AZ + "authorization:RoleAssignment"):
        i = a.inputs
        assert i["roleDefinitionId"].startswith(f"/subscriptions/{SUBSCRIPTION_ID}/providers/")
        assert i["roleAssignmentName"] == role_assignment_name(
            i["scope"], i["principalId"], i["roleDefinitionId"]
        )
        assert a.delete_before_replace


def test_no_operator_roles_without_operators(rendering):
    assert operator_grants(rendering) == set()


def test_jump_host_has_no_password_no_public_ip_and_entra_login(prod_with_jump_host):
    r = prod_with_jump_host
    bastion_subnet = one(r, "network:Subnet", "bastion-subnet").inputs
    assert bastion_subnet["subnetName"] == "AzureBastionSubnet"  # Azure requires this name
    assert bastion_subnet["addressPrefix"] == "10.50.17.0/26"
    bastion = one(r, "network:BastionHost", "bastion").inputs
    assert bastion["sku"]["name"] == "Standard" and bastion["enableTunneling"] is True
    ip = one(r, "network:PublicIPAddress", "bastion-ip").inputs
    assert ip["sku"]["name"] == "Standard" and ip["publicIPAllocationMethod"] == "Static"
    assert bastion["ipConfigurations"][0]["publicIPAddress"]["id"] == one(
        r, "network:PublicIPAddress", "bastion-ip").id  # fmt: skip
    nic = one(r, "network:NetworkInterface", "jump-host-nic").inputs
    assert "publicIPAddress" not in nic["ipConfigurations"][0]
    assert nic["ipConfigurations"][0]["subnet"]["id"] == one(r, "network:Subnet",
                                                             "jump-host-subnet").id  # fmt: skip
    vm = one(r, "compute:VirtualMachine", "jump-host").inputs
    linux = vm["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    assert "adminPassword" not in vm["osProfile"]
    assert linux["ssh"]["publicKeys"][0]["keyData"] == SSH_KEY
    assert vm["identity"]["type"] == "SystemAssigned"  # the Entra login extension needs it
    extension = one(r, "compute:VirtualMachineExtension", "jump-host-entra-login").inputs
    assert (extension["publisher"], extension["type"]) == (
        "Microsoft.Azure.ActiveDirectory", "AADSSHLoginForLinux")  # fmt: skip
    # The VM's own identity holds no role: operators act with their own.
    vm_principal = one(r, "compute:VirtualMachine", "jump-host").state["identity"]["principalId"]
    assert all(a.inputs["principalId"] != vm_principal
               for a in r.of_type(AZ + "authorization:RoleAssignment"))  # fmt: skip
    nsg_rules = one(r, "network:NetworkSecurityGroup", "jump-host-nsg").inputs["securityRules"]
    allows = [(x["sourceAddressPrefix"], x["destinationPortRanges"]) for x in nsg_rules
              if x["direction"] == "Inbound" and x["access"] == "Allow"]  # fmt: skip
    assert allows == [("10.50.17.0/26", ["22"])]
    jump_subnet = one(r, "network:Subnet", "jump-host-subnet").inputs
    assert jump_subnet["natGateway"]["id"] == one(r, "network:NatGateway", "nat").id
    assert r.outputs["jumpHostId"] == one(r, "compute:VirtualMachine", "jump-host").id
    assert r.outputs["bastionName"] == bastion["bastionHostName"]


def test_workspace_storage_ga_configuration_by_default(rendering, cfg):
    """how-to-secure-workspace-vnet, "Secure Azure storage accounts": private endpoints, the
    firewall denying by default with a resource-instance rule for the workspace and trusted
    services; shared keys on (off is preview: how-to-disable-local-auth-storage)."""
    r = rendering
    outputs = one(r, "storage:StorageAccount", "outputs").inputs
    workspace = one(r, "machinelearningservices:Workspace", "workspace")
    assert workspace.inputs["storageAccount"] == one(r, "storage:StorageAccount", "outputs").id
    assert outputs["allowSharedKeyAccess"] is True
    assert outputs["publicNetworkAccess"] == "Enabled"
    acl = outputs["networkRuleSet"]
    assert acl["defaultAction"] == "Deny" and acl["bypass"] == "AzureServices"
    # the workspaces of the platform group (`workspaces/*`): naming the one workspace would tie
    # the kept outputs account to the deployment id (tests/infra/test_redeploy.py)
    [rule] = acl["resourceAccessRules"]
    assert rule == {"tenantId": TENANT_ID, "resourceId": rule["resourceId"]}
    assert rule["resourceId"].endswith("/workspaces/*")
    assert fnmatch.fnmatchcase(workspace.id, rule["resourceId"])
    if not cfg.network.private:  # dev: the service-endpoint firewall, as before
        return
    assert acl.get("ipRules", []) == [] and acl.get("virtualNetworkRules", []) == []
    blob_endpoints = [e for e in r.of_type(AZ + "network:PrivateEndpoint")
                      if e.inputs["privateLinkServiceConnections"][0]["privateLinkServiceId"]
                      == one(r, "storage:StorageAccount", "outputs").id]  # fmt: skip
    assert len(blob_endpoints) == 2  # blob and file
    for name in ("data", "nfs"):  # data accounts: no public access, no shared keys
        data = one(r, "storage:StorageAccount", name).inputs
        assert data["publicNetworkAccess"] == "Disabled" and data["allowSharedKeyAccess"] is False


def test_workspace_storage_strict_is_an_explicit_opt_in(prod_with_jump_host):
    outputs = one(prod_with_jump_host, "storage:StorageAccount", "outputs").inputs
    assert outputs["publicNetworkAccess"] == "Disabled"
    assert outputs["allowSharedKeyAccess"] is False


def test_workspace_storage_private_closes_the_public_endpoint_and_keeps_shared_keys(landing_zone):
    outputs = one(landing_zone, "storage:StorageAccount", "outputs").inputs
    assert outputs["publicNetworkAccess"] == "Disabled"
    assert outputs["allowSharedKeyAccess"] is True


def outbound(rules):
    return [x for x in rules if x["direction"] == "Outbound"]


def test_outbound_is_azure_mls_documented_list_then_deny_all(rendering, cfg):
    """Both shipped stacks restrict outbound (prod must; dev does by default)."""
    assert cfg.network.outbound == "restricted"
    rules = one(rendering, "network:NetworkSecurityGroup", "training-nsg").inputs["securityRules"]
    out = outbound(rules)
    region = cfg.location
    documented = {(tag.format(region=region), protocol, ports)
                  for tag, protocol, ports in DOCUMENTED_OUTBOUND}  # fmt: skip
    allows = {
        (x["destinationAddressPrefix"], x["protocol"], tuple(x["destinationPortRanges"]))
        for x in out
        if x["access"] == "Allow" and x["destinationAddressPrefix"] != "VirtualNetwork"
    }
    if cfg.storage.nfs_share_gib:  # NFS 4.1 needs TCP 2049 (files-nfs-protocol)
        storage = (f"Storage.{region}", "Tcp", ("443", "445"))
        documented = (documented - {storage}) | {(storage[0], "Tcp", ("443", "445", "2049"))}
    assert allows == documented
    # Node-to-node (Horovod/NCCL) and private-endpoint traffic stays inside the VNet.
    vnet = [x for x in out if x["destinationAddressPrefix"] == "VirtualNetwork"]
    assert [(x["access"], x["protocol"], x["destinationPortRange"]) for x in vnet] == [
        ("Allow", "*", "*")]  # fmt: skip
    deny = [x for x in out if x["access"] == "Deny"]
    assert [(x["destinationAddressPrefix"], x["protocol"], x["destinationPortRange"], x["priority"])
            for x in deny] == [("*", "*", "*", 4096)]  # fmt: skip
    assert all(x["priority"] < 4096 for x in out if x["access"] == "Allow")


def test_open_outbound_adds_no_rule_and_restricted_dev_matches_the_list():
    assert outbound(_plain(security_rules("westeurope", "open"))) == []
    restricted = outbound(_plain(security_rules("westeurope", "restricted")))
    assert ("*", "Deny") in {(x["destinationAddressPrefix"], x["access"]) for x in restricted}


def _plain(rules):
    return [
        {
            "direction": r.direction,
            "access": r.access,
            "destinationAddressPrefix": r.destination_address_prefix,
        }
        for r in rules
    ]


def test_landing_zone_uses_its_network_and_central_zones(landing_zone):
    r = landing_zone
    for kind in ("VirtualNetwork", "Subnet", "NetworkSecurityGroup", "NatGateway"):
        assert r.of_type(AZ + f"network:{kind}") == [], kind
    compute = one(r, "machinelearningservices:Compute", "compute").inputs
    assert compute["properties"]["properties"]["subnet"]["id"] == (
        f"{LZ_VNET}/subnets/aml-training")  # fmt: skip
    for endpoint in r.of_type(AZ + "network:PrivateEndpoint"):
        assert endpoint.inputs["subnet"]["id"] == f"{LZ_VNET}/subnets/endpoints"
    created = {z.inputs["privateZoneName"] for z in r.of_type(AZ + "privatedns:PrivateZone")}
    central = set(LANDING_ZONE_NETWORK["privateDnsZoneIds"])
    assert created.isdisjoint(central) and "privatelink.azurecr.io" in created
    zone_ids = {z.inputs["privateZoneName"]: z.id
                for z in r.of_type(AZ + "privatedns:PrivateZone")}  # fmt: skip
    zone_ids |= LANDING_ZONE_NETWORK["privateDnsZoneIds"]
    for group in r.of_type(AZ + "network:PrivateDnsZoneGroup"):
        for config in group.inputs["privateDnsZoneConfigs"]:
            zone = config["name"].replace("-", ".")
            assert config["privateDnsZoneId"] == zone_ids[zone]
    # Every zone the stack creates is linked to its VNet and to the peered hub.
    links = {(link.inputs["privateZoneName"], link.inputs["virtualNetwork"]["id"])
             for link in r.of_type(AZ + "privatedns:VirtualNetworkLink")}  # fmt: skip
    hub = HUB.format(sub=SUBSCRIPTION_ID)
    assert links == {(zone, vnet) for zone in created for vnet in (LZ_VNET, hub)}
    assert len({link.inputs["virtualNetworkLinkName"]
                for link in r.of_type(AZ + "privatedns:VirtualNetworkLink")}) == 2  # fmt: skip


def commented_examples(path: Path) -> dict:
    """The `# azdl:<key>:` example blocks of a stack file, uncommented and parsed."""
    import yaml

    lines, examples, block = path.read_text().splitlines(), {}, None
    for line in lines:
        if re.fullmatch(r"  # azdl:\w+:", line):
            block = [line.replace("  # ", "", 1)]
            examples[line.strip("# :")] = block
        elif block is not None and line.startswith("  #   "):
            block.append(line.replace("  # ", "  ", 1))
        else:
            block = None
    return {k: yaml.safe_load("\n".join(v))[k] for k, v in examples.items()}


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_the_stack_files_commented_examples_are_valid(name):
    examples = commented_examples(STACKS / f"Pulumi.{name}.yaml")
    assert "azdl:operators" in examples and ("azdl:access" in examples) == (name == "prod")
    config = {**read_stack_file(STACKS / f"Pulumi.{name}.yaml"), **examples}
    cfg = load_config(config, stack=name)
    assert cfg.operators and (cfg.jump_host is not None) == ("azdl:access" in examples)


def doc_table(marker: str) -> list[list[str]]:
    """The rows of the Markdown table after `<!-- marker ... -->` in docs/access.md."""
    text = (STACKS.parent / "docs" / "access.md").read_text()
    lines = text.split(f"<!-- {marker}", 1)[1].splitlines()[1:]
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows


def test_the_docs_roles_table_is_what_the_program_grants():
    from infra.access import OPERATOR_GRANTS

    rows = {(role, guid) for role, guid, *_ in doc_table("roles-table")}
    assert rows == {(role, ASSIGNABLE_ROLES[role]) for _, role, _ in OPERATOR_GRANTS}


def test_the_docs_command_table_is_what_the_code_renders():
    from infra.access import command_access_table

    text = (Path(__file__).resolve().parents[2] / "docs" / "access.md").read_text()
    block = text.split("<!-- command-access:", 1)[1].split("-->\n", 1)[1].split("\n\n", 1)[0]
    assert block == command_access_table()


def test_every_operator_command_is_covered_by_the_roles_granted():
    """Every azdl command (the CLI's own parser, as docs/cli.md lists them) either needs no
    Azure role or names the grants it needs; every grant is needed by some command."""
    import sys

    from infra.access import COMMAND_ACCESS, JUMP_HOST_GRANTS, NO_AZURE_ROLE, OPERATOR_GRANTS

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "hooks"))
    import docs_hooks

    commands = docs_hooks.cli_commands()
    leaves = {c for c in commands if not any(o.startswith(c + " ") for o in commands)}
    covered = {c.split(" --")[0] for c, *_ in COMMAND_ACCESS if c.startswith("azdl ")}
    assert leaves - set(NO_AZURE_ROLE) == covered
    granted = {purpose for purpose, *_ in OPERATOR_GRANTS + JUMP_HOST_GRANTS}
    needed = {purpose for _, purposes, *_ in COMMAND_ACCESS for purpose in purposes}
    assert needed == granted


def test_the_docs_outbound_table_is_what_the_nsg_gets():
    from infra.network import OUTBOUND_SERVICE_RULES

    rows = doc_table("outbound-table")
    documented = [(name, tag.replace("<region>", "{region}"), protocol,
                   [p for p in ports.split(" (")[0].split(", ")])
                  for name, tag, protocol, ports, _ in rows[:-2]]  # fmt: skip
    assert documented == [(n, t, p, list(ports)) for n, t, p, ports in OUTBOUND_SERVICE_RULES]
    assert [row[0] for row in rows[-2:]] == [
        "AllowVirtualNetworkOutbound",
        "DenyAllOutbound (4096)",
    ]
