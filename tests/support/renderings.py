"""The stacks the infra and images tests render, each rendered once per session: the shipped
stacks and the variants several test modules read (prod with operators and a jump host, prod in
a landing zone), as `pulumi up` deploys them under the test engine.

Cached here, in one module that only `tests.support.renderings` names: a cache in a test module
or a conftest is a second cache whenever another module imports that file by name, and every
render takes seconds."""

import copy
import functools
from pathlib import Path

from infra.config import read_stack_file
from tests.support.mock_engine import SUBSCRIPTION_ID, Rendering, render, render_stack_file

STACKS = Path(__file__).resolve().parents[2] / "stacks"

OPERATOR_USER = "11111111-2222-3333-4444-555555555555"
OPERATOR_GROUP = "66666666-7777-8888-9999-aaaaaaaaaaaa"
OPERATORS = [
    {"objectId": OPERATOR_USER, "principalType": "User", "name": "alice"},
    {"objectId": OPERATOR_GROUP, "principalType": "Group", "name": "ml-team"},
]
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkq0ZpWm8pGJk2b3r9pXbq2uYkXbZ1yq0t8p7oE6fM2 ops"
JUMP_HOST = {"jumpHost": {"bastionSubnet": "10.50.17.0/26", "jumpHostSubnet": "10.50.18.0/29",
                          "sshPublicKey": SSH_KEY}}  # fmt: skip
HUB = "/subscriptions/{sub}/resourceGroups/hub-rg/providers/Microsoft.Network/virtualNetworks/hub"
LZ_VNET = (f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/spoke-rg/providers/"
           "Microsoft.Network/virtualNetworks/spoke")  # fmt: skip
CENTRAL = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/dns-rg/providers/Microsoft.Network"
LANDING_ZONE_NETWORK = {
    "mode": "privateEndpoints",
    "publicNetworkAccess": False,
    "existing": {"trainingSubnetId": f"{LZ_VNET}/subnets/aml-training",
                 "privateEndpointSubnetId": f"{LZ_VNET}/subnets/endpoints"},
    "privateDnsZoneIds": {
        "privatelink.api.azureml.ms": f"{CENTRAL}/privateDnsZones/privatelink.api.azureml.ms",
        "privatelink.notebooks.azure.net":
            f"{CENTRAL}/privateDnsZones/privatelink.notebooks.azure.net",
    },
    "dnsZoneVnetLinks": [HUB.format(sub=SUBSCRIPTION_ID)],
}  # fmt: skip


def stack(name: str, **changes) -> dict:
    """A shipped stack file's config with top-level `azdl:` keys replaced or added."""
    config = copy.deepcopy(read_stack_file(STACKS / f"Pulumi.{name}.yaml"))
    for key, value in changes.items():
        config[f"azdl:{key}"] = value
    return config


def prod_with_jump_host_config() -> dict:
    """Prod with operators, a jump host and strict workspace storage."""
    return stack("prod", operators=OPERATORS, access=JUMP_HOST,
                 storage={**read_stack_file(STACKS / "Pulumi.prod.yaml")["azdl:storage"],
                          "workspaceStorage": "strict"})  # fmt: skip


def landing_zone_config() -> dict:
    """Prod in a landing zone's network, with central DNS zones and one operator."""
    storage = {**read_stack_file(STACKS / "Pulumi.prod.yaml")["azdl:storage"],
               "workspaceStorage": "private"}  # fmt: skip
    return stack("prod", network=LANDING_ZONE_NETWORK, operators=OPERATORS[:1], storage=storage)


@functools.cache
def rendered(stack_file: Path) -> Rendering:
    """A shipped stack file, deployed."""
    return render_stack_file(stack_file)


@functools.cache
def prod_with_jump_host() -> Rendering:
    return render(prod_with_jump_host_config(), "prod")


@functools.cache
def landing_zone() -> Rendering:
    return render(landing_zone_config(), "prod")
