"""scripts/fetch_prices.py picks the Linux pay-as-you-go price out of Retail Prices API items
(fields and values as the API documents them; no network here: the items are canned)."""

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import fetch_prices

from azdl.review.prices import PRICES_FILE, load_prices


def item(price, sku="NC24ads A100 v4", product="Virtual Machines NCads A100 v4 Series",
         kind="Consumption"):  # fmt: skip
    return {"currencyCode": "USD", "retailPrice": price, "unitOfMeasure": "1 Hour", "type": kind,
            "skuName": sku, "productName": product, "armRegionName": "westeurope"}  # fmt: skip


def test_the_linux_pay_as_you_go_price_is_picked():
    items = [
        item(0.9, sku="NC24ads A100 v4 Spot"),
        item(1.5, sku="NC24ads A100 v4 Low Priority"),
        item(5.0, product="Virtual Machines NCads A100 v4 Series Windows"),
        item(2.0, kind="Reservation"),
        item(4.1),
    ]
    assert fetch_prices.linux_pay_as_you_go(items) == 4.1
    assert fetch_prices.linux_pay_as_you_go([item(0.9, sku="NC24ads A100 v4 Spot")]) is None


def test_the_linux_low_priority_price_is_picked_and_written_for_azdl_estimate(tmp_path):
    items = [
        item(0.9, sku="NC24ads A100 v4 Spot"),
        item(1.5, sku="NC24ads A100 v4 Low Priority"),
        item(3.0, sku="NC24ads A100 v4 Low Priority", product="Virtual Machines NCads A100 v4 "
             "Series Windows"),
        item(4.1),
    ]  # fmt: skip
    assert fetch_prices.linux_low_priority(items) == 1.5
    doc = yaml.safe_load(PRICES_FILE.read_text())
    fetch_prices.refresh(doc, "westeurope", fetch=lambda region, size: items)
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(doc))
    prices = load_prices(path, region="westeurope")
    assert prices.vm_low_priority("Standard_NC24ads_A100_v4") == 1.5
    assert prices.vm("Standard_NC24ads_A100_v4") == 4.1


def test_a_refresh_writes_the_regions_vm_prices_and_ends_the_stand_in(tmp_path):
    doc = yaml.safe_load(PRICES_FILE.read_text())
    fetch_prices.refresh(doc, "westeurope", fetch=lambda region, size: [item(1.25)]
                         if size != "Standard_ND96isr_H200_v5" else [])  # fmt: skip
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(doc))
    prices = load_prices(path, region="westeurope")
    assert prices.vm("Standard_NC24ads_A100_v4") == 1.25
    assert "no Linux pay-as-you-go price" in prices.vm_unpriced["Standard_ND96isr_H200_v5"]
    assert "vmHourly" not in prices.label and "storageMonthlyPerGiB" in prices.label
