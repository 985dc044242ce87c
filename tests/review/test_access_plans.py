"""Stacks that use the access settings (operators, Bastion + jump host, a landing zone's
network and DNS) render through `azdl plan`'s own path and pass every mandatory policy, like
the shipped stacks (test_shipped_stacks.py)."""

import pytest
import yaml

from azdl.envs import PACKAGES_ROOT
from azdl.review.plan import render_stack
from azdl.review.policy import check
from infra.config import read_stack_file

STACKS_DIR = PACKAGES_ROOT / "stacks"  # the shipped stacks

pytestmark = pytest.mark.slow  # each variant renders in a fresh interpreter (seconds)

SUB = "/subscriptions/00000000-0000-0000-0000-0000000000aa/resourceGroups"
SPOKE = f"{SUB}/spoke-rg/providers/Microsoft.Network/virtualNetworks/spoke"
OPERATORS = [{"objectId": "11111111-2222-3333-4444-555555555555", "principalType": "Group"}]
JUMP_HOST = {
    "jumpHost": {
        "bastionSubnet": "10.50.17.0/26",
        "jumpHostSubnet": "10.50.18.0/29",
        "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample ops",
    }
}
LANDING_ZONE = {
    "mode": "privateEndpoints",
    "publicNetworkAccess": False,
    "existing": {"trainingSubnetId": f"{SPOKE}/subnets/training",
                 "privateEndpointSubnetId": f"{SPOKE}/subnets/endpoints"},
    "privateDnsZoneIds": {"privatelink.api.azureml.ms": f"{SUB}/dns-rg/providers/"
                          "Microsoft.Network/privateDnsZones/privatelink.api.azureml.ms"},
    "dnsZoneVnetLinks": [f"{SUB}/hub-rg/providers/Microsoft.Network/virtualNetworks/hub"],
}  # fmt: skip


def prod(**changes) -> dict:
    config = read_stack_file(STACKS_DIR / "Pulumi.prod.yaml")
    return config | {f"azdl:{key}": value for key, value in changes.items()}


# A landing zone whose Azure Policy registers private endpoints in its central zones, and whose
# "deny public endpoints" policies forbid the workspace storage's firewall mode.
POLICY_DNS = {
    k: v for k, v in LANDING_ZONE.items() if k not in ("privateDnsZoneIds", "dnsZoneVnetLinks")
}
POLICY_DNS["dnsZoneGroups"] = "policy"
PRIVATE_STORAGE = read_stack_file(STACKS_DIR / "Pulumi.prod.yaml")["azdl:storage"] | {
    "workspaceStorage": "private"
}

VARIANTS = {
    "prod-jump-host": prod(operators=OPERATORS, access=JUMP_HOST),
    "prod-landing-zone": prod(operators=OPERATORS, network=LANDING_ZONE),
    "prod-landing-zone-policy-dns": prod(network=POLICY_DNS, storage=PRIVATE_STORAGE),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_access_variants_pass_every_mandatory_policy(tmp_path, name):
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": VARIANTS[name]}))
    plan, _ = render_stack(name, tmp_path)
    types = {r["type"] for r in plan["resources"]}
    if name == "prod-jump-host":
        assert {"azure-native:network:BastionHost", "azure-native:compute:VirtualMachine"} <= types
    elif name == "prod-landing-zone-policy-dns":
        assert "azure-native:network:PrivateEndpoint" in types
        assert not types & {"azure-native:network:PrivateDnsZoneGroup",
                            "azure-native:privatedns:PrivateZone",
                            "azure-native:privatedns:VirtualNetworkLink"}  # fmt: skip
    else:
        assert "azdl:infra:Network" in types
        assert "azure-native:network:VirtualNetwork" not in types
    findings = check(plan)
    assert [f for f in findings if f.mandatory] == [], findings
