"""The cost estimate: node-hours at max and min, provisioned storage, registry tier, epochs."""

import io
import json

import pytest
from rich.console import Console

from azdl.errors import AzdlError
from azdl.review import cost
from azdl.review.cost_table import cost_table
from azdl.review.prices import load_prices, regions
from infra.catalogue import VM_SIZES
from tests.review.builders import compute, plan, resource, storage

PRICES = load_prices()


def test_price_file_is_labelled_as_an_estimate_with_date_and_region():
    assert PRICES.date and PRICES.source_region
    assert PRICES.label.startswith(f"estimate: {PRICES.source_region} list prices as of")


@pytest.mark.parametrize("region", regions())
def test_every_catalogue_size_is_priced_or_listed_as_unpriced_with_a_reason(region):
    prices = load_prices(region=region)
    priced, unpriced = set(prices.vm_hourly), set(prices.vm_unpriced)
    assert priced.isdisjoint(unpriced)
    assert set(VM_SIZES) <= priced | unpriced, "a catalogue size is in neither list"
    assert all(prices.vm_unpriced.values())


def test_cluster_share_and_registry_are_priced():
    a100 = PRICES.vm("Standard_NC24ads_A100_v4")
    doc = plan(
        compute(scaleSettings={"minNodeCount": 1, "maxNodeCount": 3}),
        resource("azure-native:storage:FileShare", "nfs-share", {"shareQuota": 1024}),
        resource("azure-native:containerregistry:Registry", "acr", {"sku": {"name": "Premium"}}),
        storage(),
    )
    est = cost.estimate(doc)
    lines = {line.item: line for line in est.lines}
    assert lines["cluster gpu-cluster"].max_per_hour == pytest.approx(3 * a100)
    assert lines["cluster gpu-cluster"].idle_per_month == pytest.approx(1 * a100 * 730)
    share = 1024 * PRICES.storage_monthly_per_gib["premiumFileProvisioned"]
    assert lines["file share nfs-share"].idle_per_month == pytest.approx(share)
    assert lines["registry acr"].idle_per_month == pytest.approx(
        PRICES.registry_daily["Premium"] * 730 / 24
    )
    assert est.max_per_hour == pytest.approx(
        3 * a100 + share / 730 + PRICES.registry_daily["Premium"] / 24
    )
    assert est.unpriced == []
    assert any("premium blob account acctdata" in note for note in est.notes)
    assert est.notes[-1] == PRICES.label


def printed(est: cost.Estimate) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(cost_table(est))
    return out.getvalue()


def test_unknown_sizes_are_reported_not_priced_at_zero():
    est = cost.estimate(plan(compute(size="Standard_NC24r")))
    assert est.unpriced == [
        "cluster gpu-cluster: VM size Standard_NC24r has no price in prices.yaml"
    ]
    assert est.lines[0].max_per_hour is None


def test_total_with_an_unpriced_item_is_shown_as_a_lower_bound():
    share = resource("azure-native:storage:FileShare", "nfs-share", {"shareQuota": 100})
    est = cost.estimate(plan(compute(), compute("other", size="Standard_NC24r"), share))
    assert est.unpriced_lines == 1
    floor = 2 * PRICES.vm("Standard_NC24ads_A100_v4") + est.lines[-1].max_per_hour
    assert est.max_per_hour == pytest.approx(floor)
    total = next(line for line in printed(est).splitlines() if "total" in line)
    assert "incomplete: 1 item unpriced" in total and f"≥ {floor:,.2f}" in total
    complete = printed(cost.estimate(plan(compute())))
    total = next(line for line in complete.splitlines() if "total" in line)
    assert "≥" not in total and "unpriced" not in total


UNKNOWN = {"$unknown": ["azdl:infra:Storage$azure-native:storage:StorageAccount::nfs"]}


@pytest.mark.parametrize(
    ("res", "reason"),
    [
        (
            compute(scaleSettings={"minNodeCount": UNKNOWN, "maxNodeCount": UNKNOWN}),
            "cluster gpu-cluster: minNodeCount, maxNodeCount not known until deploy",
        ),
        (compute(size=UNKNOWN), "cluster gpu-cluster: vmSize not known until deploy"),
        (
            resource("azure-native:storage:FileShare", "share", {"shareQuota": UNKNOWN}),
            "file share share: shareQuota not known until deploy",
        ),
        (
            resource("azure-native:containerregistry:Registry", "acr", {"sku": UNKNOWN}),
            "registry acr: sku not known until deploy",
        ),
    ],
)
def test_values_known_only_after_deploy_are_unpriced_with_the_reason(res, reason):
    est = cost.estimate(plan(res))
    assert est.unpriced == [reason]
    assert est.unpriced_lines == 1 and est.max_per_hour == 0


def test_epoch_cost_on_a_cluster_of_unknown_size_is_unpriced():
    doc = plan(compute(size=UNKNOWN))
    est = cost.estimate(doc)
    cost.add_epoch_cost(est, doc, 1000.0, None)
    assert est.epoch is None
    assert est.unpriced[-1] == "epoch cost: vmSize not known until deploy on cluster gpu-cluster"


def test_epoch_cost_from_images_per_sec_and_workers():
    doc = plan(compute(scaleSettings={"minNodeCount": 0, "maxNodeCount": 4}))
    est = cost.estimate(doc)
    cost.add_epoch_cost(est, doc, images_per_sec=1000.0, workers=2, images_per_epoch=3_600_000)
    assert est.epoch["hours"] == pytest.approx(1.0)
    assert est.epoch["nodes"] == 2  # one GPU per node
    assert est.epoch["usd"] == pytest.approx(2 * PRICES.vm("Standard_NC24ads_A100_v4"))
    without_workers = cost.estimate(doc)
    cost.add_epoch_cost(without_workers, doc, 1000.0, None, 3_600_000)
    assert without_workers.epoch["nodes"] == 4  # assumed measured at max nodes
    with pytest.raises(AzdlError, match="images/sec must be positive"):
        cost.add_epoch_cost(est, doc, 0, None)


def test_throughput_record_is_read_from_a_job_log(tmp_path):
    record = {"schema": "azdl.throughput/v1", "images_per_sec": 812.5, "workers": 8}
    log = tmp_path / "job.log"
    log.write_text(f"epoch 1\nTotal images/sec: 812.5\n[1,0]<stdout>:{json.dumps(record)}\n")
    assert cost.throughput_from(log)["images_per_sec"] == 812.5
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    with pytest.raises(AzdlError, match="no line with"):
        cost.throughput_from(empty)
