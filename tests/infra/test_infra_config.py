"""Bad stack config fails in one place, before any resource, naming key, value and allowed."""

import copy
import re

import pulumi
import pytest

from infra.config import ConfigError, load_config, load_stack_file
from tests.support.minimal_config import VALID
from tests.support.mock_engine import AzureMocks, render


def with_changes(**changes):
    """VALID with `section.key=value` changes (`None` deletes the key)."""
    config = copy.deepcopy(VALID)
    for dotted, value in changes.items():
        *path, last = dotted.replace("__", ".").split(".")
        target = config
        for part in path:
            target = target[f"azdl:{part}" if target is config else part]
        key = f"azdl:{last}" if target is config else last
        if value is None:
            target.pop(key)
        else:
            target[key] = value
    return config


def error_for(config, stack="dev"):
    with pytest.raises(ConfigError) as info:
        load_config(config, stack=stack)
    return str(info.value)


def prod(**changes):
    config = with_changes(**changes)
    config["azdl:environment"] = "prod"
    config["azdl:tags"]["environment"] = "prod"
    return config


def test_the_minimal_config_is_valid_and_fills_secure_defaults():
    cfg = load_config(VALID, stack="dev")
    assert cfg.cluster.min_nodes == 0  # scale to zero
    # Without a workspace private endpoint Azure refuses nodes without public IPs.
    assert cfg.cluster.node_public_ip is True
    assert cfg.storage.outputs_protection == "none"
    assert cfg.cluster.priority == "Dedicated"
    assert cfg.storage.data_protection == "protect"
    assert cfg.network.public_network_access is True  # firewalled: VNet only
    assert cfg.storage.nfs_share_gib == 0


@pytest.mark.parametrize(
    "config, expected",
    [
        # unknown VM size: the message lists the catalogue
        (
            with_changes(**{"cluster.vmSize": "Standard_NC24r"}),
            ["azdl:cluster.vmSize", "'Standard_NC24r'", "Standard_ND96isr_H100_v5"],
        ),
        # min > max
        (
            with_changes(**{"cluster.minNodes": 3}),
            ["azdl:cluster.minNodes", "3", "0 to cluster.maxNodes (2)"],
        ),
        # max < 1
        (with_changes(**{"cluster.maxNodes": 0}), ["azdl:cluster.maxNodes", "0", "at least 1"]),
        (
            with_changes(**{"cluster.maxNodes": "4"}),
            ["azdl:cluster.maxNodes", "'4'", "must be an integer"],
        ),
        # malformed CIDR
        (
            with_changes(**{"network.addressSpace": "10.40.0.0/33"}),
            ["azdl:network.addressSpace", "'10.40.0.0/33'", "IPv4 CIDR"],
        ),
        (
            with_changes(**{"network.trainingSubnet": "10.40.0.1/20"}),
            ["azdl:network.trainingSubnet", "'10.40.0.1/20'", "host bits set"],
        ),
        # subnet outside the VNet
        (
            with_changes(**{"network.trainingSubnet": "10.41.0.0/20"}),
            [
                "azdl:network.trainingSubnet",
                "'10.41.0.0/20'",
                "inside network.addressSpace 10.40.0.0/16",
            ],
        ),
        # overlapping subnets
        (
            with_changes(**{"network.privateEndpointSubnet": "10.40.8.0/24"}),
            ["azdl:network.privateEndpointSubnet", "'10.40.8.0/24'", "does not overlap"],
        ),
        # name prefixes that break naming rules
        (
            with_changes(namePrefix="averyverylongprefix"),
            ["azdl:namePrefix", "'averyverylongprefix'", "storage account", "3-24 lowercase"],
        ),
        (
            with_changes(namePrefix="My-Team"),
            ["azdl:namePrefix", "'My-Team'", "lowercase letters and digits"],
        ),
        (
            with_changes(**{"cluster.name": "a-much-too-long-cluster"}),
            ["azdl:cluster.name", "'a-much-too-long-cluster'", "2-16"],
        ),
        (
            with_changes(**{"cluster.name": "image-build"}),
            ["azdl:cluster.name", "'image-build'", "any other compute name", "image-build compute"],
        ),
        # missing required keys
        (with_changes(location=None), ["azdl:location is required"]),
        (with_changes(**{"cluster.vmSize": None}), ["azdl:cluster.vmSize is required"]),
        (with_changes(**{"tags.costCenter": None}), ["azdl:tags.costCenter is required", "owner"]),
        # unknown network and storage modes
        (
            with_changes(**{"network.mode": "vpn"}),
            ["azdl:network.mode", "'vpn'", "serviceEndpoints, privateEndpoints"],
        ),
        (
            with_changes(storage={"dataProtection": "keep"}),
            ["azdl:storage.dataProtection", "'keep'", "protect, retain, none"],
        ),
        # typos are not silently ignored
        (
            with_changes(**{"cluster.maxNode": 2}),
            ["azdl:cluster.maxNode", "unknown key", "maxNodes"],
        ),
        (with_changes(clusterSize=2), ["azdl:clusterSize", "unknown key"]),
        # other values
        (with_changes(location="West Europe"), ["azdl:location", "'West Europe'", "westeurope"]),
        (with_changes(environment="qa"), ["azdl:environment", "'qa'", "dev, test, staging, prod"]),
        (with_changes(maxGpuSpendPerHourUsd=0), ["azdl:maxGpuSpendPerHourUsd", "0", "positive"]),
        (
            with_changes(**{"tags.environment": "prod"}),
            ["azdl:tags.environment", "'prod'", "'dev'"],
        ),
        (
            with_changes(**{"network.allowedIpRanges": ["10.1.2.3"]}),
            ["azdl:network.allowedIpRanges[0]", "'10.1.2.3'", "public IPv4"],
        ),
        (
            with_changes(**{"storage": {"nfsShareGiB": 50}}),
            ["azdl:storage.nfsShareGiB", "50", "100-102400"],
        ),
        (
            with_changes(
                **{"network.mode": "privateEndpoints", "network.publicNetworkAccess": False}
            ),
            ["azdl:registry.sku", "'Standard'", "Premium"],
        ),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(config, expected):
    message = error_for(config)
    for fragment in expected:
        assert fragment in message, message


@pytest.mark.parametrize(
    "config, expected",
    [
        # a prod stack asking for public network access
        (
            prod(
                **{
                    "network.mode": "privateEndpoints",
                    "network.publicNetworkAccess": True,
                    "registry": {"sku": "Premium"},
                }
            ),
            ["azdl:network.publicNetworkAccess", "True", "prod stack must set false"],
        ),
        (
            prod(),
            ["azdl:network.mode", "'serviceEndpoints'", "prod stack must use privateEndpoints"],
        ),
        (
            prod(
                **{
                    "network.mode": "privateEndpoints",
                    "network.publicNetworkAccess": False,
                    "registry": {"sku": "Premium"},
                    "cluster.nodePublicIp": True,
                }
            ),
            ["azdl:cluster.nodePublicIp", "True", "prod stack must set false"],
        ),
    ],
)
def test_prod_refuses_public_access(config, expected):
    message = error_for(config, stack="prod")
    for fragment in expected:
        assert fragment in message, message


def test_prod_refuses_the_image_build_computes_name_for_the_cluster():
    config = prod(**{"network.mode": "privateEndpoints", "network.publicNetworkAccess": False,
                     "registry": {"sku": "Premium"}, "cluster.name": "image-build"})  # fmt: skip
    message = error_for(config, stack="prod")
    assert "azdl:cluster.name = 'image-build' is invalid" in message
    assert "private (prod) stacks create in the same workspace" in message


def test_a_valid_prod_config_passes():
    config = prod(**{"network.mode": "privateEndpoints", "network.publicNetworkAccess": False,
                     "registry": {"sku": "Premium"}})  # fmt: skip
    cfg = load_config(config, stack="prod")
    assert cfg.network.private
    assert cfg.cluster.node_public_ip is False
    assert cfg.storage.outputs_protection == "protect"  # checkpoints and logs kept in prod


def test_nodes_without_public_ips_need_a_workspace_private_endpoint():
    message = error_for(with_changes(**{"cluster.nodePublicIp": False}))
    assert "azdl:cluster.nodePublicIp = False is invalid" in message
    assert "only in a workspace with a private endpoint" in message


@pytest.mark.parametrize("protection", ["protect", "retain", "none"])
def test_outputs_protection_is_a_setting(protection):
    config = prod(
        **{
            "network.mode": "privateEndpoints",
            "network.publicNetworkAccess": False,
            "registry": {"sku": "Premium"},
            "storage": {"outputsProtection": protection},
        }
    )
    assert load_config(config, stack="prod").storage.outputs_protection == protection
    message = error_for(with_changes(storage={"outputsProtection": "keep"}))
    assert "azdl:storage.outputsProtection = 'keep' is invalid: allowed: protect, retain, none" in (
        message
    )


def test_the_providers_location_key_points_to_azdl_location():
    config = with_changes(location=None)
    config["azure-native:location"] = "westeurope"
    message = error_for(config)
    assert "azdl:location is required but missing" in message
    assert "sets azure-native:location = 'westeurope'" in message
    assert "set azdl:location: westeurope instead" in message
    config = copy.deepcopy(VALID)
    config["azure-native:location"] = "northeurope"
    message = error_for(config)
    assert "azdl:location = 'westeurope' is invalid" in message
    assert "the same region as azure-native:location ('northeurope')" in message
    config["azure-native:location"] = "westeurope"
    assert load_config(config, stack="dev").location == "westeurope"


def test_global_names_depend_on_the_subscription_unless_the_stack_pins_a_suffix():
    a = load_config(VALID, stack="dev", subscription_id="00000000-0000-0000-0000-00000000000a")
    b = load_config(VALID, stack="dev", subscription_id="00000000-0000-0000-0000-00000000000b")
    for field in ("data_account", "outputs_account", "nfs_account", "registry"):
        assert getattr(a.names, field) != getattr(b.names, field), field
    for field in ("resource_group", "virtual_network", "cluster"):
        assert getattr(a.names, field) == getattr(b.names, field), field
    # the soft-deleted names wait for the deployment id, checked with a stand-in of its length
    assert (a.names.workspace, a.names.key_vault) == ("azdltest-mlw-000000", "azdltest-kv-000000")
    pinned = with_changes(nameSuffix="team42")
    assert load_config(pinned, stack="dev", subscription_id="x").names.registry == (
        "azdltestacrteam42"
    )


@pytest.mark.parametrize(
    "suffix, expected",
    [
        ("AB12", "azdl:nameSuffix = 'AB12' is invalid: 4-12 lowercase letters and digits"),
        (1234, "azdl:nameSuffix = 1234 is invalid"),
        (
            "abcdefghijkl",
            "azdl:namePrefix = 'azdltesting' is invalid: with azdl:nameSuffix 'abcdefghijkl', "
            "it makes the storage account name 'azdltestingdataabcdefghijkl'",
        ),
    ],
)
def test_a_pinned_suffix_is_validated(suffix, expected):
    assert expected in error_for(with_changes(nameSuffix=suffix, namePrefix="azdltesting"))


def test_shipped_stack_files_are_valid(stack_file):
    cfg = load_stack_file(stack_file)
    assert cfg.stack == stack_file.name.split(".")[1]


def test_every_key_of_the_shipped_stack_files_carries_a_comment(stack_file):
    """A key line has a comment of its own: on the line(s) just above, or at its end."""
    lines = stack_file.read_text().splitlines()
    start = lines.index("config:") + 1
    key = re.compile(r"\s+[\w:.-]+:(\s|$)")
    uncommented = []
    for i in range(start, len(lines)):
        line = lines[i]
        if not key.match(line):
            continue
        above = next((lines[j] for j in range(i - 1, start - 2, -1) if lines[j].strip()), "")
        if not (above.lstrip().startswith("#") or " # " in line):
            uncommented.append(line.strip())
    assert uncommented == [], f"{stack_file.name}: keys without a comment: {uncommented}"
    assert any(line.startswith("  azdl:network:") for line in lines)  # sections are keys too


def test_invalid_config_stops_the_program_before_any_resource():
    """Through the real entry path (Pulumi config -> read_config -> declare) under mocks."""
    with pytest.raises(ConfigError, match=r"azdl:cluster\.minNodes"):
        render(with_changes(**{"cluster.minNodes": 5}), stack="dev")

    from infra import program

    mocks = AzureMocks()
    pulumi.runtime.set_mocks(mocks, project="azdl", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"azdl:environment": "dev"})

    @pulumi.runtime.test
    def run():
        program.declare(program.read_config())

    with pytest.raises(ConfigError, match="azdl:location is required"):
        run()
    assert mocks.resources == []


def test_the_providers_location_key_is_read_by_the_program_to_point_to_azdl_location():
    """Pulumi hands the program azure-native:location too; the program checks it."""
    config = with_changes(location=None)
    config["azure-native:location"] = "westeurope"
    with pytest.raises(ConfigError, match="set azdl:location: westeurope instead"):
        render(config, stack="dev")


def test_a_misspelt_key_stops_the_program_too():
    """Pulumi itself ignores unknown keys; the program must not."""
    with pytest.raises(ConfigError, match=r"azdl:cluster = 'not-json' is invalid: an object"):
        render({**VALID, "azdl:cluster": "not-json"}, stack="dev")
    with pytest.raises(ConfigError, match=r"azdl:clustr = .*unknown key; known: "):
        render({**VALID, "azdl:clustr": {"maxNodes": 2}}, stack="dev")


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"azdl:locaton": "westeurope"}, r"azdl:locaton = .* \(did you mean location\?\)$"),
        (
            {"azdl:cluster": {"maxNode": 2}},
            r"azdl:cluster\.maxNode = 2 .* \(did you mean maxNodes\?\)$",
        ),
        ({"azdl:gpuCount": 2}, r"azdl:gpuCount = 2 is invalid: unknown key; known: [^(]*$"),
    ],
)
def test_a_misspelt_key_gets_the_nearest_known_one(changes, said):
    """As a misspelt command or option does (azdl.suggest); none when nothing is close."""
    with pytest.raises(ConfigError, match=said):
        load_config({**VALID, **changes}, stack="dev")
