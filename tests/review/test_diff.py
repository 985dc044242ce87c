"""`azdl diff`: per-property changes, replacements from data, loud security flags, exit codes."""

import json

import pytest

from azdl.cli import main
from azdl.review import manifest
from azdl.review.diff import diff, flatten, forces_replacement, render_text
from tests.review.builders import compute, plan, resource, storage


def nsg(*rules: dict) -> dict:
    return resource(
        "azure-native:network:NetworkSecurityGroup", "nsg", {"securityRules": list(rules)}
    )


AML_RULE = {"name": "aml", "direction": "Inbound", "access": "Allow",
            "sourceAddressPrefix": "AzureMachineLearning", "priority": 110}  # fmt: skip
ROLE = "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/"
READER = ROLE + "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
OWNER = ROLE + "8e3af657-a8ff-404c-9d86-bca7d93b5e97"


def role(definition: str, scope: str = "/subscriptions/s/resourceGroups/rg") -> dict:
    inputs = {"roleDefinitionId": definition, "scope": scope, "principalId": "p"}
    return resource("azure-native:authorization:RoleAssignment", "read", inputs)


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
            "inbound allow rule ssh added or widened",
        ),
        (
            nsg(AML_RULE),
            nsg(AML_RULE | {"sourceAddressPrefix": "Internet"}),
            "inbound allow rule aml added or widened",
        ),
        (role(READER), role(OWNER), "role changed from Storage Blob Data Reader to Owner"),
    ],
)
def test_security_widening_changes_are_flagged_loudly(before, after, reason):
    result = diff(plan(before), plan(after))
    assert reason in [r for _res, r in result.security]
    text = render_text(result)
    assert "!!! SECURITY-WIDENING CHANGES" in text and reason in text
    assert result.exit_code == 3


def test_tightening_is_not_flagged():
    result = diff(plan(storage()), plan(storage(publicNetworkAccess="Disabled")))
    assert result.security == [] and result.exit_code == 1


def test_new_role_assignment_and_new_inbound_rule_resource_are_flagged():
    rule = resource(
        "azure-native:network:SecurityRule", "r", AML_RULE | {"sourceAddressPrefix": "*"}
    )
    result = diff(plan(storage()), plan(storage(), role(READER), rule))
    reasons = [r for _res, r in result.security]
    assert "new role assignment: Storage Blob Data Reader" in reasons
    assert "new inbound allow rule" in reasons


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


def test_changed_stack_settings_are_listed_but_decide_nothing():
    base, head = plan(storage()), plan(storage(), budget=20)
    result = diff(base, head)
    assert [(c.path, c.old, c.new) for c in result.config] == [
        ("azdl:maxGpuSpendPerHourUsd", 10, 20)
    ]
    assert result.exit_code == 0
    assert "~ azdl:maxGpuSpendPerHourUsd: 10 => 20" in render_text(result)


def test_flatten_keys_named_lists_by_name_and_keeps_unknowns_whole():
    flat = flatten({"securityRules": [AML_RULE], "id": {"$unknown": ["x"]}, "tags": {"a": "1"}})
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
    assert json.loads(capsys.readouterr().out)["exitCode"] == 0


def test_cli_diff_rejects_another_manifest_format(tmp_path, capsys):
    other = plan(storage()) | {"format": "azdl.plan/v0"}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(other))
    assert main(["diff", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert "manifest format 'azdl.plan/v0' is not supported; this azdl reads 'azdl.plan/v1'" in err
