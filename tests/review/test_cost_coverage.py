"""The estimate adds up: every resource type a plan declares is priced, noted as billed on use,
or named as free; prices are per region, dated, from a file the user may replace."""

import pytest
import yaml

from azdl.cli import main
from azdl.errors import AzdlError
from azdl.review import cost
from azdl.review.prices import load_prices, regions
from tests.review.builders import compute, plan, resource
from tests.shipped import STACK_FILES


def test_the_shipped_stacks_regions_have_dated_prices():
    for path in STACK_FILES:
        region = yaml.safe_load(path.read_text())["config"]["azdl:location"]
        assert region in regions(), f"{path}: no prices for {region}"
        prices = load_prices(region=region)
        assert prices.known and prices.date and "not fetched" in prices.label


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_resource_of_the_shipped_stacks_is_accounted_for(shipped_plans, stack):
    doc = shipped_plans[stack]
    est = cost.estimate(doc)
    assert est.unpriced == [], est.unpriced  # nothing unknown, nothing unpriced
    custom = {res["key"] for res in doc["resources"] if res["custom"]}
    assert set(est.accounted) == custom
    assert set(est.accounted.values()) == {"priced", "usage", "free"}


def test_prod_fixed_network_costs_are_in_the_idle_floor(shipped_plans):
    est = cost.estimate(shipped_plans["prod"])
    prices = load_prices(region="westeurope")
    lines = {line.item: line for line in est.lines}
    hourly = prices.fixed_hourly
    assert lines["NAT gateway nat"].idle_per_month == pytest.approx(hourly["natGateway"] * 730)
    assert lines["public IP nat-ip"].idle_per_month == pytest.approx(
        hourly["publicIpStandardStatic"] * 730
    )
    assert lines["private endpoints"].idle_per_month == pytest.approx(
        7 * hourly["privateEndpoint"] * 730
    )
    assert lines["private DNS zones"].idle_per_month == pytest.approx(
        6 * prices.fixed_monthly["privateDnsZone"]
    )
    assert est.idle_per_month == pytest.approx(sum(line.idle_per_month for line in est.lines))


def jump_host_resources():
    bastion = resource("azure-native:network:BastionHost", "bastion",
                       {"sku": {"name": "Standard"}, "location": "westeurope"})  # fmt: skip
    vm = resource("azure-native:compute:VirtualMachine", "jump-host", {
        "vmName": "jump", "location": "westeurope",
        "hardwareProfile": {"vmSize": "Standard_B2s"},
        "storageProfile": {"osDisk": {"diskSizeGB": 30,
                                      "managedDisk": {"storageAccountType": "Standard_LRS"}}},
    })  # fmt: skip
    ip = resource("azure-native:network:PublicIPAddress", "bastion-ip",
                  {"sku": {"name": "Standard"}, "publicIPAllocationMethod": "Static"})  # fmt: skip
    nic = resource("azure-native:network:NetworkInterface", "jump-nic", {})
    ext = resource("azure-native:compute:VirtualMachineExtension", "aad-login", {})
    return bastion, vm, ip, nic, ext


def test_bastion_and_the_jump_host_are_priced():
    est = cost.estimate(plan(*jump_host_resources()))
    prices = load_prices(region="westeurope")
    lines = {line.item: line for line in est.lines}
    assert est.unpriced == []
    assert lines["Bastion bastion"].max_per_hour == pytest.approx(
        prices.fixed_hourly["bastionStandard"]
    )
    vm = prices.vm("Standard_B2s") * 730 + prices.managed_disk_monthly["Standard_LRS_S4"]
    assert lines["VM jump"].idle_per_month == pytest.approx(vm)
    assert "NetworkInterface" in est.notes[-2] and "VirtualMachineExtension" in est.notes[-2]


def test_an_unknown_resource_type_is_unpriced_and_makes_the_total_a_lower_bound():
    firewall = resource("azure-native:network:AzureFirewall", "fw", {"location": "westeurope"})
    est = cost.estimate(plan(compute(), firewall))
    assert est.unpriced == [
        "AzureFirewall fw: no price rule for azure-native:network:AzureFirewall in "
        "azdl/review/cost.py"
    ]
    assert est.unpriced_lines == 1
    assert est.accounted[firewall["key"]] == "unpriced"


def test_prices_follow_the_stacks_region():
    west = cost.estimate(plan(compute()))  # builders put resources in westeurope
    doc = plan(compute())
    doc["config"]["azdl:location"] = "eastus"
    east = cost.estimate(doc)
    assert "westeurope list prices" in west.notes[-1] and "eastus list prices" in east.notes[-1]
    doc["config"]["azdl:location"] = "brazilsouth"
    nowhere = cost.estimate(doc)
    assert (
        nowhere.lines[0].max_per_hour is None
        and "has no prices for brazilsouth" in (nowhere.unpriced[0])
    )


def test_a_users_price_file_replaces_the_shipped_one(tmp_path, monkeypatch):
    own = tmp_path / "prices.yaml"
    own.write_text(yaml.safe_dump({
        "defaultRegion": "westeurope", "hoursPerMonth": 730, "provenance": "our EA rates",
        "regions": {"westeurope": {"date": "2026-11-01",
                                   "vmHourly": {"Standard_NC24ads_A100_v4": 2.0}}},
    }))  # fmt: skip
    prices = load_prices(own, region="westeurope")
    est = cost.estimate(plan(compute()), prices)
    assert est.lines[0].max_per_hour == pytest.approx(4.0)
    assert "as of 2026-11-01 (our EA rates" in est.notes[-1]
    monkeypatch.setenv("AZDL_PRICES", str(own))  # what the policy pack reads
    assert load_prices(region="westeurope").vm("Standard_NC24ads_A100_v4") == 2.0


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "No such file"), ("regions: 3\n", "expected a mapping with `regions:`"),
     ("regions: {westeurope: {vmHourly: {X: cheap}}}\n", "must map names to numbers")],
)  # fmt: skip
def test_a_bad_price_file_is_one_error_line(tmp_path, capsys, content, message):
    path = tmp_path / "p.yaml"
    if content is not None:
        path.write_text(content)
    assert main(["plan", "dev", "--prices", str(path)]) == 2
    assert message in capsys.readouterr().err
    with pytest.raises(AzdlError):
        load_prices(path, region="westeurope").vm("X")


def test_the_price_table_says_one_way_for_each_type():
    """Each entry prices each resource, all of its type together, or names why it is free; an
    entry that does none of these would account a resource and add nothing to the estimate."""
    assert cost.PRICING
    for kind, pricing in cost.PRICING.items():
        ways = [way for way in (pricing.each, pricing.together, pricing.free) if way]
        assert len(ways) == 1, kind
        assert pricing.how in {"priced", "usage", "free"}, kind
        assert (pricing.how == "free") == bool(pricing.free), kind
