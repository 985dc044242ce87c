"""Landing zones: DNS zone groups left to Azure Policy, and a prod stack that passes "deny public
endpoints" policies.

The deny rule is the one the Azure Landing Zones' `Deny-PublicPaaSEndpoints` initiative
("Public network access should be disabled for PaaS services", Azure/Enterprise-Scale) applies
through built-in policies such as "Storage accounts should disable public network access"
(b2982f36-99f2-4db5-8eff-283140c09693), Container registries (0fdf0491-d080-4575-b627-
ad0e843cba0f), Key Vault (55615ac9-af46-4a59-874e-391cc3dfb490) and "Azure Machine Learning
Workspaces should disable public network access" (438c38d2-3772-465a-a9cc-7a6666a275ce): a
resource of those types whose publicNetworkAccess is not Disabled is denied.
"""

import pytest

from infra.config import ConfigError, load_config
from tests.support.mock_engine import render
from tests.support.renderings import LANDING_ZONE_NETWORK, landing_zone, stack

AZ = "azure-native:"
DENIED_UNLESS_DISABLED = (
    "storage:StorageAccount",
    "resources:Resource",  # the registry, declared at an API the typed resource lacks
    "keyvault:Vault",
    "machinelearningservices:Workspace",
)
DNS_KEYS = ("privateDnsZoneIds", "dnsZoneVnetLinks")
POLICY_DNS = {k: v for k, v in LANDING_ZONE_NETWORK.items() if k not in DNS_KEYS}
POLICY_DNS["dnsZoneGroups"] = "policy"


def public_endpoints(rendering) -> list[str]:
    found = []
    for short in DENIED_UNLESS_DISABLED:
        for r in rendering.of_type(AZ + short):
            nested = short in ("keyvault:Vault", "resources:Resource")
            inputs = r.inputs.get("properties", r.inputs) if nested else r.inputs
            if inputs.get("publicNetworkAccess") != "Disabled":
                found.append(f"{short} {r.name}")
    return found


@pytest.mark.slow  # renders a variant of the program (seconds)
def test_private_workspace_storage_passes_deny_public_endpoints():
    assert public_endpoints(landing_zone()) == []


def test_the_default_firewall_mode_is_what_such_policies_deny(rendering, cfg):
    """Prod's default (`firewall`, Azure ML's GA configuration) keeps the outputs account's
    public endpoint Enabled behind a deny-all firewall: the one resource such a policy denies."""
    if cfg.environment != "prod":
        pytest.skip("dev keeps public endpoints by design")
    assert public_endpoints(rendering) == ["storage:StorageAccount outputs"]


@pytest.fixture(scope="module")
def policy_dns():
    storage = {"workspaceStorage": "private"}
    return render(stack("prod", network=POLICY_DNS, storage=storage), "prod")


def test_zone_groups_left_to_policy_create_endpoints_only(policy_dns):
    """Only the endpoints; the deploy-order policies still hold (the computes wait for the
    workspace endpoint): tests/review/test_access_plans.py, prod-landing-zone-policy-dns."""
    endpoints = {e.name for e in policy_dns.of_type(AZ + "network:PrivateEndpoint")}
    assert endpoints == {"workspace-pe", "keyvault-pe", "registry-pe", "data-blob-pe",
                         "outputs-blob-pe", "outputs-file-pe"}  # fmt: skip
    for kind in ("network:PrivateDnsZoneGroup", "privatedns:PrivateZone",
                 "privatedns:VirtualNetworkLink"):  # fmt: skip
        assert policy_dns.of_type(AZ + kind) == [], kind
    assert public_endpoints(policy_dns) == []


BAD = [
    ({**LANDING_ZONE_NETWORK, "dnsZoneGroups": "policy"},
     ["azdl:network.privateDnsZoneIds", "not set with network.dnsZoneGroups: policy"]),
    ({"mode": "privateEndpoints", "publicNetworkAccess": False, "addressSpace": "10.50.0.0/16",
      "trainingSubnet": "10.50.0.0/20", "privateEndpointSubnet": "10.50.16.0/24",
      "dnsZoneGroups": "policy"},
     ["azdl:network.dnsZoneGroups = 'policy'", "stack unless network.existing is set"]),
    ({**POLICY_DNS, "dnsZoneGroups": "azure"},
     ["azdl:network.dnsZoneGroups = 'azure'", "stack, policy"]),
]  # fmt: skip


@pytest.mark.parametrize("network, expected", BAD)
def test_bad_dns_zone_group_settings_name_the_key(network, expected):
    with pytest.raises(ConfigError) as info:
        load_config(stack("prod", network=network), stack="prod")
    for fragment in expected:
        assert fragment in str(info.value)
