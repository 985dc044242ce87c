"""`azdl diff`: per-property changes, replacements from data, loud security flags, exit codes."""

import json

import pytest

from azdl.cli import main
from azdl.review import manifest
from azdl.review.diff import diff, flatten, render_text
from azdl.review.replacement import arm_id_inputs, forces_replacement
from azdl.review.widening import ROLE_RANKS
from infra.azure_facts import BUILT_IN_ROLES
from tests.review.builders import compute, plan, resource, storage


def nsg(*rules: dict) -> dict:
    return resource(
        "azure-native:network:NetworkSecurityGroup", "nsg", {"securityRules": list(rules)}
    )


AML_RULE = {"name": "aml", "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
            "sourceAddressPrefix": "AzureMachineLearning", "destinationPortRanges": ["44224"],
            "destinationAddressPrefix": "VirtualNetwork", "priority": 110}  # fmt: skip
DENY_RULE = {"name": "DenyInternetInbound", "direction": "Inbound", "access": "Deny",
             "protocol": "*", "sourceAddressPrefix": "Internet", "sourcePortRange": "*",
             "destinationAddressPrefix": "*", "destinationPortRange": "*",
             "priority": 4000}  # fmt: skip
ROLE = "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/"
READER = ROLE + "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
CONTRIBUTOR = ROLE + "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
ACR_PUSH = ROLE + "8311e382-0749-4cb8-b61a-304f252e45ec"
OWNER = ROLE + BUILT_IN_ROLES["Owner"]  # Azure's id, from infra.azure_facts
GROUP = "/subscriptions/s/resourceGroups/rg"


def role(definition: str, scope: str = GROUP) -> dict:
    inputs = {"roleDefinitionId": definition, "scope": scope, "principalId": "p"}
    return resource("azure-native:authorization:RoleAssignment", "read", inputs)


def rule(**inputs) -> dict:
    """A standalone azure-native SecurityRule."""
    base = {k: v for k, v in AML_RULE.items() if k != "name"} | {"securityRuleName": "r"}
    return resource("azure-native:network:SecurityRule", "r", base | inputs)


def test_identical_plans_have_no_changes_and_exit_0():
    base = plan(storage(), compute())
    result = diff(base, plan(storage(), compute()))
    assert result.resources == [] and result.exit_code == 0
    assert "0 to create, 0 to update, 0 to replace, 0 to delete" in render_text(result)


def test_in_place_change_is_routine_exit_1():
    head = plan(storage(), compute(scaleSettings={"minNodeCount": 0, "maxNodeCount": 4}))
    result = diff(plan(storage(), compute()), head)
    [changed] = result.resources
    assert changed.action == "update"
    [change] = changed.changes
    assert (change.path, change.old, change.new, change.replace) == (
        "properties.properties.scaleSettings.maxNodeCount",
        2,
        4,
        False,
    )
    assert result.exit_code == 1
    assert "~ properties.properties.scaleSettings.maxNodeCount: 2 => 4" in render_text(result)


@pytest.mark.parametrize(
    ("before", "after", "path"),
    [
        (compute(), compute(size="Standard_ND96isr_H100_v5"), "properties.properties.vmSize"),
        (storage(), storage(kind="StorageV2"), "kind"),
        (storage(), storage(sku={"name": "Premium_ZRS"}), "sku.name"),
        (storage(), storage(location="northeurope"), "location"),
    ],
)
def test_replacement_forcing_changes_are_marked(before, after, path):
    result = diff(plan(before), plan(after))
    [changed] = result.resources
    assert changed.action == "replace"
    assert [c.path for c in changed.changes if c.replace] == [path]
    assert result.exit_code == 3
    assert f"~ {path}: " in render_text(result) and "[forces replacement]" in render_text(result)


def test_resource_options_replace_on_changes_and_ignore_changes_are_honoured():
    declared = storage() | {"replaceOnChanges": ["tags"]}
    result = diff(plan(declared), plan(declared | {"inputs": declared["inputs"] | {"tags": {}}}))
    assert result.resources[0].action == "replace"
    ignoring = compute() | {"ignoreChanges": ["properties.properties.vmSize"]}
    bigger = compute(size="Standard_ND96isr_H100_v5") | {"ignoreChanges": ignoring["ignoreChanges"]}
    result = diff(plan(ignoring), plan(bigger))
    [change] = result.resources[0].changes
    assert change.ignored and not change.replace
    assert "[ignored: ignoreChanges]" in render_text(result)


@pytest.mark.parametrize(
    ("resource_type", "names"),
    [
        ("network:NatGateway", {"natGatewayName"}),
        ("network:PublicIPAddress", {"publicIpAddressName"}),
        ("network:PrivateDnsZoneGroup", {"privateDnsZoneGroupName", "privateEndpointName"}),
        ("network:SecurityRule", {"securityRuleName", "networkSecurityGroupName"}),
        ("privatedns:PrivateZone", {"privateZoneName"}),
        ("privatedns:VirtualNetworkLink", {"virtualNetworkLinkName", "privateZoneName"}),
        ("machinelearningservices:Compute", {"computeName", "workspaceName"}),
        ("machinelearningservices:EnvironmentContainer", {"name", "workspaceName"}),
        ("machinelearningservices:EnvironmentVersion", {"name", "version", "workspaceName"}),
        ("machinelearningservices:Datastore", {"name", "workspaceName"}),
        ("storage:FileShare", {"accountName", "shareName"}),  # not its `expand` option
        ("authorization:RoleAssignment", {"roleAssignmentName", "scope"}),
    ],
)
def test_the_inputs_of_an_arm_id_force_replacement(resource_type, names):
    token = f"azure-native:{resource_type}"
    expected = names | ({"resourceGroupName"} if "RoleAssignment" not in token else set())
    assert set(arm_id_inputs(token)) == expected
    assert all(forces_replacement(token, name) for name in names)


def test_a_display_name_is_no_arm_name():
    assert not forces_replacement("azure-native:machinelearningservices:Workspace", "friendlyName")
    assert arm_id_inputs("docker-build:index:Image") == ()


def test_replacement_list_is_data():
    assert forces_replacement("azure-native:storage:StorageAccount", "sku.name")
    assert not forces_replacement("azure-native:storage:StorageAccount", "tags.owner")
    assert forces_replacement("azure-native:keyvault:Vault", "location")  # the "*" entry


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        (storage(publicNetworkAccess="Disabled"), storage(), "public network access turned on"),
        (storage(), storage(minimumTlsVersion="TLS1_0"), "minimum TLS version lowered"),
        (storage(), storage(allowBlobPublicAccess=True), "anonymous blob access allowed"),
        (
            storage(),
            storage(networkRuleSet={"defaultAction": "Allow", "ipRules": []}),
            "firewall default action no longer Deny",
        ),
        (compute(), compute(enableNodePublicIp=True), "cluster nodes get public IPs"),
        (
            nsg(AML_RULE),
            nsg(AML_RULE, AML_RULE | {"name": "ssh", "sourceAddressPrefix": "*"}),
            "new inbound allow rule ssh from the internet",
        ),
        (
            nsg(AML_RULE),
            nsg(AML_RULE | {"sourceAddressPrefix": "Internet"}),
            "inbound allow rule aml widened: source azuremachinelearning => internet",
        ),
        (
            nsg(AML_RULE),
            nsg(AML_RULE | {"destinationPortRanges": ["*"]}),
            "inbound allow rule aml widened: destination ports 44224 => *",
        ),
        (
            nsg(AML_RULE),
            nsg(AML_RULE | {"destinationPortRanges": ["44000-45000"], "protocol": "*"}),
            "inbound allow rule aml widened: destination ports 44224 => 44000-45000; "
            "protocol tcp => *",
        ),
        (nsg(AML_RULE, DENY_RULE), nsg(AML_RULE), "inbound deny rule DenyInternetInbound removed"),
        (
            nsg(DENY_RULE),
            nsg(DENY_RULE | {"destinationPortRange": "22"}),
            "inbound deny rule DenyInternetInbound weakened: destination ports * => 22",
        ),
        (
            nsg(DENY_RULE),
            nsg(DENY_RULE | {"priority": 4096}),
            "inbound deny rule DenyInternetInbound weakened: priority 4000 => 4096",
        ),
        (
            nsg(DENY_RULE),
            nsg(DENY_RULE | {"access": "Allow"}),
            "inbound deny rule DenyInternetInbound no longer denies inbound traffic",
        ),
        (
            rule(),
            rule(sourceAddressPrefixes=["203.0.113.0/24"]),
            "inbound allow rule r widened: source azuremachinelearning => "
            "203.0.113.0/24,azuremachinelearning",
        ),
        (
            rule(),
            rule(destinationPortRanges=["*"]),
            "inbound allow rule r widened: destination ports 44224 => *",
        ),
        (
            rule(access="Deny"),
            rule(access="Deny", sourceAddressPrefix="10.0.0.0/8"),
            "inbound deny rule r weakened: source azuremachinelearning => 10.0.0.0/8",
        ),
        (role(READER), role(OWNER), "role broadened from Storage Blob Data Reader to Owner"),
        (
            role(CONTRIBUTOR),
            role(ACR_PUSH),
            "role changed from Storage Blob Data Contributor to AcrPush (other permissions)",
        ),
        (
            role(READER),
            role(READER, "/subscriptions/s"),
            "scope broadened from resource group to subscription",
        ),
        (
            role(READER, "/subscriptions/s"),
            role(READER, "/providers/Microsoft.Management/managementGroups/mg"),
            "scope broadened from subscription to management group",
        ),
        (
            role(READER),
            role(READER, "/subscriptions/s/resourceGroups/other"),
            "role assignment moved to another resource group",
        ),
    ],
)
def test_security_widening_changes_are_flagged_loudly(before, after, reason):
    result = diff(plan(before), plan(after))
    assert reason in [r for _res, r in result.security]
    text = render_text(result)
    assert "!!! SECURITY-WIDENING CHANGES" in text and reason in text
    assert result.exit_code == 3


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (storage(), storage(publicNetworkAccess="Disabled")),
        (storage(minimumTlsVersion="TLS1_2"), storage(minimumTlsVersion="TLS1_3")),
        (nsg(AML_RULE), nsg(AML_RULE | {"destinationPortRanges": ["44224"], "priority": 120})),
        (nsg(AML_RULE | {"protocol": "*"}), nsg(AML_RULE)),
        # the same rule written with the plural property: no change in what it matches
        (
            nsg(DENY_RULE),
            nsg(DENY_RULE | {"destinationPortRange": None, "destinationPortRanges": ["*"]}),
        ),
        (nsg(DENY_RULE), nsg(DENY_RULE | {"destinationPortRanges": ["22"], "priority": 3000})),
        (rule(), rule(sourceAddressPrefixes=[], destinationPortRanges=["44224"])),
    ],
)
def test_tightening_and_rewording_are_not_flagged(before, after):
    result = diff(plan(before), plan(after))
    assert result.security == []
    assert result.exit_code == 1


def test_storage_property_set_to_azures_default_is_not_widening_but_unset_can_be():
    unset = storage()
    del unset["inputs"]["publicNetworkAccess"]
    assert diff(plan(unset), plan(storage())).security == []  # absent means Enabled already
    result = diff(plan(storage(publicNetworkAccess="Disabled")), plan(unset))
    assert [r for _res, r in result.security] == ["public network access turned on"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (role(OWNER), role(READER)),
        (role(READER, "/subscriptions/s"), role(READER)),
        (role(READER), role(READER, GROUP + "/providers/Microsoft.Storage/storageAccounts/a")),
    ],
)
def test_narrowing_a_role_assignment_is_not_flagged(before, after):
    result = diff(plan(before), plan(after))
    assert result.security == []
    assert result.resources[0].action == "replace"  # Azure re-creates role assignments


@pytest.mark.parametrize(
    ("created", "reason"),
    [
        (storage(), 'created with publicNetworkAccess = "Enabled"'),
        (storage(minimumTlsVersion="TLS1_0"), 'created with minimumTlsVersion = "TLS1_0"'),
        (storage(allowBlobPublicAccess=True), "created with allowBlobPublicAccess = true"),
        (compute(enableNodePublicIp=True), "created with enableNodePublicIp = true"),
        (
            resource("azure-native:containerregistry:Registry", "acr", {"adminUserEnabled": True}),
            "created with adminUserEnabled = true",
        ),
        (
            nsg(AML_RULE | {"name": "ssh", "sourceAddressPrefix": "Internet"}),
            "new inbound allow rule ssh from the internet",
        ),
        (rule(sourceAddressPrefix="*"), "new inbound allow rule r from the internet"),
        (role(READER), "new role assignment: Storage Blob Data Reader on a resource group"),
    ],
)
def test_new_resources_with_open_settings_are_flagged(created, reason):
    result = diff(plan(), plan(created))
    assert reason in [r for _res, r in result.security]
    assert result.exit_code == 3


def test_new_resources_with_closed_settings_are_routine():
    closed = storage(publicNetworkAccess="Disabled")
    result = diff(plan(), plan(closed, compute(), nsg(DENY_RULE)))
    assert result.security == [] and result.exit_code == 1


def test_removing_a_standalone_deny_rule_is_flagged():
    deny = rule(access="Deny", sourceAddressPrefix="Internet")
    result = diff(plan(deny), plan())
    assert [r for _res, r in result.security] == ["inbound deny rule r removed"]


def test_removal_and_dropped_protection_need_attention():
    removed = diff(plan(storage(), compute()), plan(storage()))
    assert [r.action for r in removed.resources] == ["delete"] and removed.exit_code == 3
    protected = storage() | {"protect": True}
    result = diff(plan(protected), plan(storage()))
    [changed] = result.resources
    assert changed.attention == ["deletion protection removed (protect / retainOnDelete)"]
    assert result.exit_code == 3
    swapped = diff(plan(storage() | {"retainOnDelete": True}), plan(protected))
    assert swapped.resources[0].attention == [] and swapped.exit_code == 1


def test_changed_stack_settings_alone_are_a_change():
    base = plan(storage())
    head = plan(storage())
    head["config"]["azdl:cluster"] = {"idleSecondsBeforeScaleDown": 600}
    result = diff(base, head)
    assert result.resources == [] and result.exit_code == 1
    assert "~ azdl:cluster.idleSecondsBeforeScaleDown: (absent) => 600" in render_text(result)
    assert diff(plan(storage(), budget=20), plan(storage())).exit_code == 1  # budget lowered


def test_raised_gpu_budget_needs_attention():
    result = diff(plan(storage()), plan(storage(), budget=20))
    assert [(c.path, c.old, c.new) for c in result.config] == [
        ("azdl:maxGpuSpendPerHourUsd", 10, 20)
    ]
    assert result.config_attention == [
        "azdl:maxGpuSpendPerHourUsd: GPU budget raised from 10 to 20 USD/h"
    ]
    assert result.exit_code == 3
    text = render_text(result)
    assert "~ azdl:maxGpuSpendPerHourUsd: 10 => 20" in text
    assert "stack setting azdl:maxGpuSpendPerHourUsd: GPU budget raised" in text


@pytest.mark.parametrize(
    ("key", "old", "new", "reason"),
    [
        (
            "azdl:cluster",
            {"nodePublicIp": False},
            {"nodePublicIp": True},
            "cluster nodes get public IPs",
        ),
        ("azdl:cluster", {}, {"nodePublicIp": True}, "cluster nodes get public IPs"),
        (
            "azdl:network",
            {"mode": "privateEndpoints"},
            {"mode": "serviceEndpoints"},
            "private endpoints dropped",
        ),
        (
            "azdl:network",
            {"publicNetworkAccess": False},
            {"publicNetworkAccess": True},
            "public network access turned on",
        ),
        (
            "azdl:network",
            {"allowedIpRanges": ["203.0.113.0/30"]},
            {"allowedIpRanges": ["203.0.113.0/30", "198.51.100.0/30"]},
            "firewall admits more internet addresses",
        ),
    ],
)
def test_stack_settings_that_widen_access_are_flagged(key, old, new, reason):
    base, head = plan(storage()), plan(storage())
    base["config"][key], head["config"][key] = old, new
    result = diff(base, head)
    assert [c.security for c in result.config_security] == [reason]
    assert result.exit_code == 3
    assert f"!!! stack setting {key}." in render_text(result)
    assert diff(head, base).config_security == []  # the way back closes it again


def test_flatten_keys_named_lists_by_name_and_keeps_unknowns_whole():
    aml = {"name": "aml", "direction": "Inbound", "access": "Allow", "priority": 110,
           "sourceAddressPrefix": "AzureMachineLearning"}  # fmt: skip
    flat = flatten({"securityRules": [aml], "id": {"$unknown": ["x"]}, "tags": {"a": "1"}})
    assert flat == {
        "securityRules[aml].access": "Allow",
        "securityRules[aml].direction": "Inbound",
        "securityRules[aml].priority": 110,
        "securityRules[aml].sourceAddressPrefix": "AzureMachineLearning",
        "id": {"$unknown": ["x"]},
        "tags.a": "1",
    }


def test_cli_diff_of_manifest_files_exit_code_and_json(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(manifest.dumps(plan(storage())))
    head.write_text(manifest.dumps(plan(storage(allowBlobPublicAccess=True))))
    assert main(["diff", str(base), str(head)]) == 3
    assert "anonymous blob access allowed" in capsys.readouterr().out
    assert main(["diff", str(base), str(base), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "azdl.diff-result/v1" and document["exitCode"] == 0


def test_cli_diff_rejects_another_manifest_format(tmp_path, capsys):
    other = plan(storage()) | {"format": "azdl.plan/v0"}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(other))
    assert main(["diff", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert "manifest format 'azdl.plan/v0' is not supported; this azdl reads 'azdl.plan/v1'" in err


def test_every_ranked_role_is_a_built_in_role():
    """A rank under a name infra.azure_facts does not know would never apply."""
    assert set(ROLE_RANKS) <= set(BUILT_IN_ROLES)
