"""Each policy against a passing and a violating resource, through pulumi-policy's own args."""

import copy
import json

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from azdl.cli import main
from azdl.review import manifest
from azdl.review.policy import check, load_rules
from tests.infra.documented_outbound import PUBLIC_INTERNET_REQUIRED
from tests.review.builders import TAGS, compute, plan, resource, storage

rules = load_rules()
POLICY = {p.name: p for p in rules.POLICIES}
PROD = dict(TAGS, environment="prod")

VM = "azure-native:compute:VirtualMachine"
REGISTRY = "azure-native:containerregistry:Registry"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
NIC = "azure-native:network:NetworkInterface"
LINUX_KEY_ONLY = {"linuxConfiguration": {"disablePasswordAuthentication": True}}
AML_INBOUND = {
    "name": "aml",
    "direction": "Inbound",
    "access": "Allow",
    "priority": 110,
    "sourceAddressPrefix": "AzureMachineLearning",
}
OUT_AML = {
    "name": "aml-out",
    "direction": "Outbound",
    "access": "Allow",
    "priority": 100,
    "protocol": "Tcp",
    "destinationAddressPrefix": "AzureMachineLearning",
}
# An allow rule per service tag Azure ML requires (transcribed from its pages, with dates, in
# tests/infra/documented_outbound.py).
OUT_REQUIRED = [
    {"name": f"allow-{i}", "direction": "Outbound", "access": "Allow", "priority": 200 + i,
     "protocol": protocol, "destinationAddressPrefix": tag.format(region="westeurope")}
    for i, (tag, protocol) in enumerate(sorted({(t, p) for t, p, _ in PUBLIC_INTERNET_REQUIRED}))
]  # fmt: skip
DENY_OUT = {
    "name": "deny-out",
    "direction": "Outbound",
    "access": "Deny",
    "priority": 4096,
    "protocol": "*",
    "destinationAddressPrefix": "*",
    "destinationPortRange": "*",
}


def options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def violations(policy_name: str, res: dict, protect: bool = False) -> list[str]:
    """Messages `policy_name` reports for one manifest-style resource."""
    messages: list[str] = []
    args = ResourceValidationArgs(
        res["type"],
        unknown_checking_proxy(copy.deepcopy(res["inputs"])),
        f"urn:pulumi:dev::azdl::{res['key']}",
        res["name"],
        options(protect),
        None,
    )
    POLICY[policy_name].validate(args, lambda message, urn=None: messages.append(message))
    return messages


def stack_violations(
    resources: list[dict], config: dict, policy: str = "gpu-spend-within-budget"
) -> list[str]:
    messages: list[str] = []
    views = [
        PolicyResource(
            r["type"],
            unknown_checking_proxy(r["inputs"]),
            r["key"],
            r["name"],
            options(),
            None,
            None,
            [],
            {},
        )
        for r in resources
    ]
    POLICY[policy].validate(
        StackValidationArgs(views, config), lambda message, urn=None: messages.append(message)
    )
    return messages


def test_every_policy_has_severity_remediation_and_all_but_one_are_mandatory():
    assert len(POLICY) == 26
    for policy in rules.POLICIES:
        assert policy.severity is not None, policy.name
        assert policy.remediation_steps and "\n" not in policy.remediation_steps, policy.name
    advisory = [p.name for p in rules.POLICIES if p.enforcement_level is EnforcementLevel.ADVISORY]
    assert advisory == ["gpu-spend-known"]
    assert all(
        p.enforcement_level is EnforcementLevel.MANDATORY
        for p in rules.POLICIES
        if p.name not in advisory
    )


@pytest.mark.parametrize(
    ("policy", "good", "bad", "message"),
    [
        (
            "storage-minimum-tls-1-2",
            storage(),
            storage(minimumTlsVersion="TLS1_0"),
            "storage account 'data': minimumTlsVersion is TLS1_0; TLS 1.2 is required",
        ),
        (
            "storage-minimum-tls-1-2",
            storage(),
            storage(minimumTlsVersion=None),
            "minimumTlsVersion is not set (Azure then accepts TLS 1.0)",
        ),
        (
            "storage-no-public-blob-access",
            storage(),
            storage(allowBlobPublicAccess=True),
            "storage account 'data': allowBlobPublicAccess is True; anonymous blob access must be",
        ),
        (
            "storage-no-public-blob-access",
            resource("azure-native:storage:BlobContainer", "c", {"publicAccess": "None"}),
            resource("azure-native:storage:BlobContainer", "c", {"publicAccess": "Blob"}),
            "blob container 'c': publicAccess is Blob; it must be None",
        ),
        (
            "storage-private-in-prod",
            storage(publicNetworkAccess="Disabled", tags=PROD),
            storage(publicNetworkAccess="Enabled", tags=PROD),
            "storage account 'data' (prod): publicNetworkAccess is Enabled",
        ),
        # The workspace's storage in Azure ML's GA configuration (how-to-secure-workspace-vnet):
        # public access Enabled, but the firewall admits no public address or VNet.
        (
            "storage-private-in-prod",
            storage(
                "outputs",
                kind="StorageV2",
                tags=PROD,
                networkRuleSet={
                    "defaultAction": "Deny",
                    "bypass": "AzureServices",
                    "resourceAccessRules": [{"tenantId": "t", "resourceId": "w"}],
                },
            ),
            storage(
                "outputs",
                kind="StorageV2",
                tags=PROD,
                networkRuleSet={
                    "defaultAction": "Deny",
                    "ipRules": [{"iPAddressOrRange": "203.0.113.7"}],
                },
            ),
            "storage account 'outputs' (prod): publicNetworkAccess is Enabled and its firewall "
            "admits internet addresses (ipRules)",
        ),
        (
            "storage-private-in-prod",
            storage("outputs", kind="StorageV2", tags=PROD, publicNetworkAccess="Disabled"),
            storage(
                "outputs", kind="StorageV2", tags=PROD, networkRuleSet={"defaultAction": "Allow"}
            ),
            "storage account 'outputs' (prod): publicNetworkAccess is Enabled and its firewall's "
            "defaultAction is Allow",
        ),
        (
            "nfs-not-internet-reachable",
            storage("nfs", kind="FileStorage"),
            storage("nfs", kind="FileStorage", networkRuleSet={"defaultAction": "Allow"}),
            "NFS account 'nfs': its firewall's defaultAction is Allow, so the internet can reach",
        ),
        (
            "nfs-not-internet-reachable",
            storage("nfs", kind="FileStorage", publicNetworkAccess="Disabled"),
            storage(
                "nfs",
                kind="FileStorage",
                networkRuleSet={
                    "defaultAction": "Deny",
                    "ipRules": [{"iPAddressOrRange": "1.2.3.0/30"}],
                },
            ),
            "NFS account 'nfs': its firewall admits internet addresses (ipRules)",
        ),
        (
            "registry-admin-user-disabled",
            resource("azure-native:containerregistry:Registry", "acr", {"adminUserEnabled": False}),
            resource("azure-native:containerregistry:Registry", "acr", {"adminUserEnabled": True}),
            "container registry 'acr': the admin user is enabled",
        ),
        (
            "compute-no-public-access-in-prod",
            compute() | {"inputs": compute()["inputs"] | {"tags": PROD}},
            compute(enableNodePublicIp=True)
            | {"inputs": compute(enableNodePublicIp=True)["inputs"] | {"tags": PROD}},
            "compute 'compute' (prod): enableNodePublicIp is True; nodes get public IPs",
        ),
        (
            "compute-no-public-access-in-prod",
            compute() | {"inputs": compute()["inputs"] | {"tags": PROD}},
            compute(remoteLoginPortPublicAccess="NotSpecified")
            | {
                "inputs": compute(remoteLoginPortPublicAccess="NotSpecified")["inputs"]
                | {"tags": PROD}
            },
            "remoteLoginPortPublicAccess is NotSpecified; the SSH port may be open",
        ),
        (
            "nsg-inbound-azureml-only",
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {
                    "securityRules": [
                        {
                            "name": "aml",
                            "direction": "Inbound",
                            "access": "Allow",
                            "sourceAddressPrefix": "AzureMachineLearning",
                        },
                        {
                            "name": "batch",
                            "direction": "Inbound",
                            "access": "Allow",
                            "sourceAddressPrefix": "BatchNodeManagement.westeurope",
                        },
                        {
                            "name": "deny",
                            "direction": "Inbound",
                            "access": "Deny",
                            "sourceAddressPrefix": "Internet",
                        },
                    ]
                },
            ),
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {
                    "securityRules": [
                        {
                            "name": "ssh",
                            "direction": "Inbound",
                            "access": "Allow",
                            "sourceAddressPrefix": "*",
                        },
                    ]
                },
            ),
            "NSG 'nsg' rule 'ssh' allows inbound traffic from '*'",
        ),
        (
            "nsg-inbound-azureml-only",
            resource(
                "azure-native:network:SecurityRule",
                "r",
                {
                    "direction": "Inbound",
                    "access": "Allow",
                    "sourceAddressPrefixes": ["10.0.0.0/8"],
                },
            ),
            resource(
                "azure-native:network:SecurityRule",
                "r",
                {
                    "direction": "Inbound",
                    "access": "Allow",
                    "sourceAddressPrefixes": ["10.0.0.0/8", "8.8.8.0/24"],
                },
            ),
            "NSG rule 'r' allows inbound traffic from '8.8.8.0/24'",
        ),
        # A prod compute subnet's NSG must end its outbound with a deny-all (Azure's default
        # AllowInternetOutBound otherwise lets everything out).
        (
            "nsg-outbound-restricted-in-prod",
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {"tags": PROD, "securityRules": [AML_INBOUND, *OUT_REQUIRED, DENY_OUT]},
            ),
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {"tags": PROD, "securityRules": [AML_INBOUND, *OUT_REQUIRED]},
            ),
            "NSG 'nsg' (prod) has no deny-all outbound rule",
        ),
        (
            "nsg-outbound-restricted-in-prod",
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {"tags": PROD, "securityRules": [AML_INBOUND, *OUT_REQUIRED, DENY_OUT]},
            ),
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {
                    "tags": PROD,
                    "securityRules": [
                        AML_INBOUND,
                        *OUT_REQUIRED,
                        OUT_AML | {"priority": 4097},
                        DENY_OUT,
                    ],
                },
            ),
            "NSG 'nsg' (prod): outbound rules aml-out come after the deny-all (priority 4096)",
        ),
        # ... and allows what Azure ML requires before that deny (how-to-secure-workspace-vnet).
        (
            "nsg-outbound-restricted-in-prod",
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {"tags": PROD, "securityRules": [AML_INBOUND, *OUT_REQUIRED, DENY_OUT]},
            ),
            resource(
                "azure-native:network:NetworkSecurityGroup",
                "nsg",
                {
                    "tags": PROD,
                    "securityRules": [
                        AML_INBOUND,
                        DENY_OUT,
                        *(
                            r
                            for r in OUT_REQUIRED
                            if r["destinationAddressPrefix"] != "AzureFrontDoor.FrontEnd"
                        ),
                    ],
                },
            ),
            "NSG 'nsg' (prod) denies outbound traffic Azure ML requires of its compute: no allow "
            "rule before the deny-all for AzureFrontDoor.FrontEnd",
        ),
        # The jump host: no password logins, no public IP in prod (docs/access.md).
        (
            "vm-no-password-no-public-ip",
            resource(VM, "jump-host", {"osProfile": LINUX_KEY_ONLY, "tags": PROD}),
            resource(
                VM,
                "jump-host",
                {"osProfile": {**LINUX_KEY_ONLY, "adminPassword": "hunter2"}, "tags": PROD},
            ),
            "virtual machine 'jump-host' has an admin password in its osProfile",
        ),
        (
            "vm-no-password-no-public-ip",
            resource(VM, "jump-host", {"osProfile": LINUX_KEY_ONLY}),
            resource(
                VM,
                "jump-host",
                {"osProfile": {"linuxConfiguration": {"disablePasswordAuthentication": False}}},
            ),
            "virtual machine 'jump-host': disablePasswordAuthentication is False",
        ),
        (
            "vm-no-password-no-public-ip",
            resource(NIC, "nic", {"ipConfigurations": [{"name": "ip"}], "tags": PROD}),
            resource(
                NIC,
                "nic",
                {
                    "ipConfigurations": [{"name": "ip", "publicIPAddress": {"id": "pip"}}],
                    "tags": PROD,
                },
            ),
            "network interface 'nic' (prod) has a public IP address",
        ),
        (
            "role-assignments-least-privilege",
            resource(
                "azure-native:authorization:RoleAssignment",
                "pull",
                {
                    "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/"
                    "roleDefinitions/7f951dda-4ed3-4680-a7ca-43fe172d538d",
                    "scope": "/subscriptions/s/resourceGroups/rg/providers/x/registries/r",
                },
            ),
            resource(
                "azure-native:authorization:RoleAssignment",
                "pull",
                {
                    "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/"
                    "roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c",
                    "scope": "/subscriptions/s/resourceGroups/rg/providers/x/registries/r",
                },
            ),
            "role assignment 'pull' grants Contributor",
        ),
        (
            "role-assignments-least-privilege",
            resource(
                "azure-native:authorization:RoleAssignment",
                "read",
                {
                    "roleDefinitionId": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
                    "scope": "/subscriptions/s/resourceGroups/rg",
                },
            ),
            resource(
                "azure-native:authorization:RoleAssignment",
                "read",
                {
                    "roleDefinitionId": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
                    "scope": "/subscriptions/s",
                },
            ),
            "role assignment 'read' is scoped above a resource group (a subscription, "
            "management group or the tenant root: /subscriptions/s)",
        ),
        (
            "required-tags",
            storage(),
            storage(tags={"environment": "dev", "project": "azdl"}),
            "StorageAccount 'data' lacks the tags owner, costCenter",
        ),
        (
            "role-assignments-deployer-can-make",
            resource(
                ROLE_ASSIGNMENT,
                "pull",
                {
                    "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/"
                    "roleDefinitions/7f951dda-4ed3-4680-a7ca-43fe172d538d",
                    "principalType": "ServicePrincipal",
                },
            ),
            resource(
                ROLE_ASSIGNMENT,
                "keys",
                {
                    # Storage Account Key Operator Service Role: not a role the stack assigns
                    "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/"
                    "roleDefinitions/81a9662b-bebf-436f-a333-f67b29880f12",
                    "principalType": "ServicePrincipal",
                },
            ),
            "role assignment 'keys' grants role 81a9662b-bebf-436f-a333-f67b29880f12, which the "
            "deployer's role-assignment condition does not allow",
        ),
        (
            "role-assignments-deployer-can-make",
            resource(ROLE_ASSIGNMENT, "op", {"principalType": "Group"}),
            resource(ROLE_ASSIGNMENT, "op", {"principalType": "ForeignGroup"}),
            "role assignment 'op' is for a ForeignGroup; the deployer's condition allows "
            "ServicePrincipal, User, Group",
        ),
        (
            "outputs-zone-redundant-in-prod",
            storage("outputs", kind="StorageV2", sku={"name": "Standard_ZRS"}, tags=PROD),
            storage("outputs", kind="StorageV2", sku={"name": "Standard_LRS"}, tags=PROD),
            "storage account 'outputs' (prod): sku Standard_LRS keeps all copies in one",
        ),
        (
            "registry-zone-redundant-in-prod",
            resource(
                REGISTRY,
                "registry",
                {"sku": {"name": "Premium"}, "tags": PROD, "zoneRedundancy": "Enabled"},
            ),
            resource(REGISTRY, "registry", {"sku": {"name": "Premium"}, "tags": PROD}),
            "container registry 'registry' (prod): zoneRedundancy is not set (Disabled)",
        ),
        (
            "vm-encryption-at-host",
            resource(
                VM,
                "jump-host",
                {"osProfile": LINUX_KEY_ONLY, "securityProfile": {"encryptionAtHost": True}},
            ),
            resource(
                VM,
                "jump-host",
                {"osProfile": LINUX_KEY_ONLY, "securityProfile": {"securityType": "TrustedLaunch"}},
            ),
            "virtual machine 'jump-host': securityProfile.encryptionAtHost is not set (false)",
        ),
    ],
)
def test_policy_passes_good_and_reports_bad(policy, good, bad, message):
    assert violations(policy, good) == []
    found = violations(policy, bad)
    assert len(found) == 1, found
    assert message in found[0]
    assert f"Fix: {POLICY[policy].remediation_steps}" in found[0]


def test_prod_only_policies_leave_dev_alone():
    assert violations("storage-private-in-prod", storage(publicNetworkAccess="Enabled")) == []
    dev_lrs = storage("outputs", kind="StorageV2", sku={"name": "Standard_LRS"})
    assert violations("outputs-zone-redundant-in-prod", dev_lrs) == []
    assert violations("compute-no-public-access-in-prod", compute(enableNodePublicIp=True)) == []
    assert violations("data-accounts-protected-in-prod", storage(), protect=False) == []
    open_dev = resource("azure-native:network:NetworkSecurityGroup", "nsg",
                        {"tags": dict(TAGS), "securityRules": [AML_INBOUND]})  # fmt: skip
    assert violations("nsg-outbound-restricted-in-prod", open_dev) == []


def test_prod_data_accounts_must_be_protected():
    prod_data = storage(tags=PROD)
    assert violations("data-accounts-protected-in-prod", prod_data, protect=True) == []
    found = violations("data-accounts-protected-in-prod", prod_data, protect=False)
    assert found and "data account 'data' (prod) is not protected" in found[0]
    outputs = storage("outputs", kind="StorageV2", tags=PROD)  # not a data account
    assert violations("data-accounts-protected-in-prod", outputs, protect=False) == []


def test_required_tags_skip_resources_that_take_no_tags():
    container = resource("azure-native:storage:BlobContainer", "c", {"publicAccess": "None"})
    assert violations("required-tags", container) == []


def test_unknown_values_are_skipped_not_guessed():
    unknown = storage(minimumTlsVersion=UNKNOWN_STRING_VALUE)
    assert violations("storage-minimum-tls-1-2", unknown) == []


def test_gpu_spend_within_budget():
    two_a100 = [compute()]  # 2 x 3.673 USD/h
    assert stack_violations(two_a100, {"maxGpuSpendPerHourUsd": 10}) == []
    over = stack_violations(two_a100, {"maxGpuSpendPerHourUsd": 5})
    assert len(over) == 1
    assert "maximum GPU spend 7.35 USD/h exceeds the budget 5.00 USD/h" in over[0]
    assert "compute: 2 x Standard_NC24ads_A100_v4 at 3.67 USD/h" in over[0]


def test_gpu_spend_ignores_cpu_clusters_and_reports_unpriced_sizes():
    cpu = compute("image-build", "Standard_D4s_v3")
    assert stack_violations([cpu], {"maxGpuSpendPerHourUsd": 0.01}) == []
    unknown = stack_violations([compute(size="Standard_XYZ")], {"maxGpuSpendPerHourUsd": 1000})
    assert unknown == [
        "VM size Standard_XYZ has no price in prices.yaml, so the GPU spend cannot be checked "
        "against the budget: add its price to azdl/review/prices.yaml"
    ]
    h200 = stack_violations(
        [compute(size="Standard_ND96isr_H200_v5")], {"maxGpuSpendPerHourUsd": 1e6}
    )
    assert h200 == [
        "VM size Standard_ND96isr_H200_v5 has no price in prices.yaml (generally available after "
        "this list's date; no list price recorded), so the GPU spend cannot be checked against "
        "the budget: add its price to azdl/review/prices.yaml"
    ]


def test_gpu_spend_without_a_budget_is_a_violation(monkeypatch):
    monkeypatch.setattr("pulumi.runtime.get_config", lambda key: None)  # no engine config either
    found = stack_violations([compute()], {})
    assert found and "no GPU budget given" in found[0]


def test_offline_runner_reports_resource_and_policy():
    doc = plan(storage(allowBlobPublicAccess=True), compute(), budget=5)
    findings = check(doc)
    assert [(f.policy, f.resource) for f in findings] == [
        ("storage-no-public-blob-access", "azure-native:storage:StorageAccount::data"),
        ("gpu-spend-within-budget", None),
    ]
    assert all(f.mandatory and f.severity == "high" for f in findings)


def test_offline_runner_passes_unknown_markers_as_unknowns():
    doc = plan(storage(minimumTlsVersion={"$unknown": ["x"]}))
    assert check(doc) == []


def test_policy_command_exit_codes_and_pack_config(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(manifest.dumps(plan(storage(), compute())))
    bad.write_text(manifest.dumps(plan(storage(minimumTlsVersion="TLS1_1"))))
    assert main(["policy", str(good)]) == 0
    assert "stack dev: all 26 policies pass" in capsys.readouterr().out
    assert main(["policy", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "storage-minimum-tls-1-2" in out and "minimumTlsVersion is TLS1_1" in out
    assert main(["policy", "--pack-config", str(good)]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config == {"gpu-spend-within-budget": {"maxGpuSpendPerHourUsd": 10}}


def test_nsg_rule_with_unknown_sources_is_skipped():
    rule = resource(
        "azure-native:network:SecurityRule", "r",
        {"direction": "Inbound", "access": "Allow", "sourceAddressPrefixes": UNKNOWN_STRING_VALUE},
    )  # fmt: skip
    assert violations("nsg-inbound-azureml-only", rule) == []


def test_prod_compute_with_unknown_node_settings_is_skipped():
    unknown = compute()
    unknown["inputs"]["tags"] = PROD
    unknown["inputs"]["properties"]["properties"] = UNKNOWN_STRING_VALUE
    assert violations("compute-no-public-access-in-prod", unknown) == []


def test_gpu_budget_falls_back_to_the_stack_config_the_engine_passes(monkeypatch):
    monkeypatch.setattr(
        "pulumi.runtime.get_config",
        lambda key: "5" if key == "azdl:maxGpuSpendPerHourUsd" else None,
    )
    found = stack_violations([compute()], {})
    assert found and "exceeds the budget 5.00 USD/h" in found[0]


@pytest.mark.parametrize(
    "scope",
    [
        "/providers/Microsoft.Management/managementGroups/mg",
        "/subscriptions/s",
        "/",
    ],
)
def test_role_scope_above_a_resource_group_is_reported(scope):
    res = resource(
        "azure-native:authorization:RoleAssignment", "read",
        {"roleDefinitionId": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1", "scope": scope},
    )  # fmt: skip
    [found] = violations("role-assignments-least-privilege", res)
    assert f"a subscription, management group or the tenant root: {scope})" in found


# Azure's privileged built-in roles and their ids, from the "Privileged" table of
# MicrosoftDocs/azure-docs articles/role-based-access-control/built-in-roles.md (commit 00a58329,
# ms.date 2026-04-09).
PRIVILEGED_BUILT_IN_ROLES = {
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "Role Based Access Control Administrator": "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
}


@pytest.mark.parametrize(("role", "guid"), sorted(PRIVILEGED_BUILT_IN_ROLES.items()))
def test_each_privileged_built_in_role_is_reported_by_its_documented_id(role, guid):
    definition = f"/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/{guid}"
    res = resource(
        "azure-native:authorization:RoleAssignment", "broad",
        {"roleDefinitionId": definition, "scope": "/subscriptions/s/resourceGroups/rg"},
    )  # fmt: skip
    [found] = violations("role-assignments-least-privilege", res)
    assert f"role assignment 'broad' grants {role};" in found


@pytest.mark.parametrize(
    ("node", "missing"),
    [
        ({"vmSize": UNKNOWN_STRING_VALUE}, "vmSize"),
        (
            {"scaleSettings": {"minNodeCount": 0, "maxNodeCount": UNKNOWN_STRING_VALUE}},
            "maxNodeCount",
        ),
    ],
)
def test_gpu_clusters_left_out_of_the_budget_check_are_reported_as_advisory(node, missing):
    unknown = compute(**node)
    assert stack_violations([unknown], {"maxGpuSpendPerHourUsd": 1}) == []  # skipped there
    assert stack_violations([unknown], {}, "gpu-spend-known") == [
        f"compute compute ({missing}): not known until deploy, so this cluster is left out of "
        "the GPU budget check"
    ]
    assert stack_violations([compute()], {}, "gpu-spend-known") == []


def test_offline_runner_reports_advisory_findings_without_failing(tmp_path, capsys):
    doc = plan(compute(scaleSettings={"minNodeCount": 0, "maxNodeCount": {"$unknown": ["x"]}}))
    [finding] = check(doc)
    assert (finding.policy, finding.mandatory) == ("gpu-spend-known", False)
    path = tmp_path / "plan.json"
    path.write_text(manifest.dumps(doc))
    assert main(["policy", str(path)]) == 0
    assert "advisory" in capsys.readouterr().out


# ---- diagnostics and recoverable outputs: stack policies over the plan's dependencies -------

DIAG = "azure-native:monitor:DiagnosticSetting"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
REGISTRY_TYPE = "azure-native:containerregistry:Registry"


def diagnosed(target: dict, name: str, **inputs) -> dict:
    return resource(DIAG, name, {"workspaceId": "/subscriptions/s/.../workspaces/logs"} | inputs,
                    dependsOn=[target["key"]])  # fmt: skip


def stack_findings(policy: str, *resources: dict) -> list[str]:
    return [f.message for f in check(plan(*resources, stack="prod")) if f.policy == policy]


def test_prod_services_must_send_logs_to_log_analytics():
    vault = resource("azure-native:keyvault:Vault", "key-vault", {"tags": PROD})
    registry = resource(REGISTRY_TYPE, "registry", {"tags": PROD, "sku": {"name": "Premium"}})
    outputs = storage("outputs", kind="StorageV2", tags=PROD)
    nfs = storage("nfs", kind="FileStorage", tags=PROD)  # a documented trade-off: not required
    good = [vault, registry, outputs, nfs, diagnosed(vault, "kv-diag"),
            diagnosed(registry, "acr-diag"), diagnosed(outputs, "out-diag")]  # fmt: skip
    assert stack_findings("diagnostic-settings-in-prod", *good) == []
    no_registry_diag = [r for r in good if r["name"] != "acr-diag"]
    found = stack_findings("diagnostic-settings-in-prod", *no_registry_diag)
    assert found == ["Registry 'registry' (prod) sends no resource logs to Log Analytics: no "
                     "diagnostic setting with a workspaceId takes it"]  # fmt: skip
    nowhere = [*no_registry_diag, resource(DIAG, "acr-diag", {}, dependsOn=[registry["key"]])]
    assert len(stack_findings("diagnostic-settings-in-prod", *nowhere)) == 1
    dev = [resource("azure-native:keyvault:Vault", "key-vault", {"tags": dict(TAGS)})]
    assert [f for f in check(plan(*dev)) if f.policy == "diagnostic-settings-in-prod"] == []


def blob_service(account: dict, **inputs) -> dict:
    return resource(BLOB_SERVICE, "outputs-blob-service", inputs, dependsOn=[account["key"]])


@pytest.mark.parametrize(
    ("settings", "recoverable"),
    [
        ({"deleteRetentionPolicy": {"enabled": True, "days": 30}, "isVersioningEnabled": True},
         True),
        ({"deleteRetentionPolicy": {"enabled": True, "days": 30},
          "containerDeleteRetentionPolicy": {"enabled": True, "days": 30}}, True),
        ({"deleteRetentionPolicy": {"enabled": True, "days": 30}}, False),
        ({"isVersioningEnabled": True,
          "containerDeleteRetentionPolicy": {"enabled": True, "days": 30}}, False),
        (None, False),
    ],
)  # fmt: skip
def test_prod_outputs_keep_deleted_and_overwritten_blobs(settings, recoverable):
    outputs = storage("outputs", kind="StorageV2", tags=PROD)
    services = [] if settings is None else [blob_service(outputs, **settings)]
    found = stack_findings("outputs-recoverable-in-prod", outputs, *services)
    if recoverable:
        assert found == []
    else:
        assert found == ["StorageAccount 'outputs' (prod): no blob service properties with blob "
                         "soft delete and versioning or container soft delete, so a deleted or "
                         "overwritten checkpoint is gone"]  # fmt: skip


def test_the_packs_required_outbound_tags_are_the_documented_ones():
    documented = {t.split(".{region}")[0] for t, _, _ in PUBLIC_INTERNET_REQUIRED}
    assert set(rules.network.REQUIRED_OUTBOUND_TAGS) == documented
