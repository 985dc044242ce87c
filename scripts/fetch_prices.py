"""Refresh the VM prices of one region in a price file from the Azure Retail Prices API.

    .venv/bin/python scripts/fetch_prices.py westeurope [--file azdl/review/prices.yaml]

The API is public and needs no Azure account
(https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices). For
every size in infra/vm_sizes.yaml (and the jump host's) it takes the pay-as-you-go Linux price
(type Consumption; not Spot, not Low Priority, not Windows), writes it to the region's
`vmHourly` and the Linux Low Priority price to `vmHourlyLowPriority` (what `azdl estimate`
prices low-priority nodes with), dates the region today and drops `vmHourly` from the region's
`standIn`. Sizes the
API has no price for in that region go to `vmUnpriced` with that reason. Other sections are kept.
Needs internet access (the machine this project was written on has none, so the shipped file
was not refreshed this way).
"""

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azdl.review.prices import PRICES_FILE  # noqa: E402
from infra.catalogue import VM_SIZES  # noqa: E402

API = "https://prices.azure.com/api/retail/prices"
EXTRA_SIZES = ("Standard_B2s",)  # the optional jump host's default size


def linux_pay_as_you_go(items: list[dict]) -> float | None:
    """The hourly Linux pay-as-you-go price among one size's price items, if any."""
    prices = [
        item["retailPrice"]
        for item in items
        if item.get("type") == "Consumption"
        and item.get("unitOfMeasure") == "1 Hour"
        and "Windows" not in item.get("productName", "")
        and not any(w in item.get("skuName", "") for w in ("Spot", "Low Priority"))
    ]
    return min(prices) if prices else None


def linux_low_priority(items: list[dict]) -> float | None:
    """The hourly Linux Low Priority price among one size's price items, if any."""
    prices = [
        item["retailPrice"]
        for item in items
        if item.get("type") == "Consumption"
        and item.get("unitOfMeasure") == "1 Hour"
        and "Windows" not in item.get("productName", "")
        and "Low Priority" in item.get("skuName", "")
    ]
    return min(prices) if prices else None


def query(region: str, size: str) -> list[dict]:
    flt = (
        f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' "
        f"and armSkuName eq '{size}' and priceType eq 'Consumption'"
    )
    url, items = f"{API}?{urllib.parse.urlencode({'$filter': flt})}", []
    while url:
        with urllib.request.urlopen(url, timeout=30) as response:
            page = json.load(response)
        items += page.get("Items", [])
        url = page.get("NextPageLink")
    return items


def refresh(doc: dict, region: str, fetch=query) -> dict:
    block = doc["regions"].setdefault(region, {})
    hourly, unpriced, low = {}, {}, {}
    for size in sorted(set(VM_SIZES) | set(EXTRA_SIZES)):
        items = fetch(region, size)
        price = linux_pay_as_you_go(items)
        low_priority = linux_low_priority(items)
        if low_priority is not None:
            low[size] = low_priority
        if price is None:
            unpriced[size] = f"the Retail Prices API lists no Linux pay-as-you-go price in {region}"
        else:
            hourly[size] = price
    block["date"] = time.strftime("%Y-%m-%d")
    block["vmHourly"], block["vmUnpriced"] = hourly, unpriced
    block["vmHourlyLowPriority"] = low
    stand_in = block.get("standIn")
    if stand_in:
        stand_in["sections"] = [
            s for s in stand_in.get("sections", []) if s not in ("vmHourly", "vmUnpriced")
        ]
    return doc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("region", help="an Azure region's programmatic name, e.g. westeurope")
    p.add_argument("--file", type=Path, default=PRICES_FILE, help="price file to update")
    args = p.parse_args()
    doc = yaml.safe_load(args.file.read_text())
    try:
        refresh(doc, args.region)
    except OSError as exc:
        print(f"error: cannot reach {API}: {exc}", file=sys.stderr)
        return 2
    args.file.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    print(f"{args.file}: {args.region} VM prices refreshed ({doc['regions'][args.region]['date']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
