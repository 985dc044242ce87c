"""Cost estimate of a plan, from what it declares and `prices.yaml` (an estimate, labelled).

Clusters: price per node-hour × max nodes (the ceiling) and × min nodes (the idle floor).
NFS share: provisioned GiB × premium-file price. Registry: its tier's daily price. Premium
blob data is billed on what is stored, so only its rate is shown. A VM size without a price
is reported as unpriced, never counted as zero. Given a measured throughput, the cost of one
epoch on the training cluster.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azdl.errors import AzdlError
from azdl.review.prices import Prices, load_prices
from infra.catalogue import VM_SIZES
from training.throughput import parse_throughput_lines

COMPUTE = "azure-native:machinelearningservices:Compute"
IMAGENET_TRAIN_IMAGES = 1_281_167


@dataclass
class Line:
    item: str
    detail: str
    max_per_hour: float | None  # None: unpriced
    idle_per_month: float | None


@dataclass
class Estimate:
    stack: str
    lines: list[Line] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    epoch: dict[str, Any] | None = None

    @property
    def max_per_hour(self) -> float:
        return sum(x.max_per_hour or 0.0 for x in self.lines)

    @property
    def idle_per_month(self) -> float:
        return sum(x.idle_per_month or 0.0 for x in self.lines)


def _scale(res: dict[str, Any]) -> tuple[str | None, int, int, str]:
    node = res["inputs"].get("properties", {}).get("properties", {})
    scale = node.get("scaleSettings", {})
    return (
        node.get("vmSize"),
        int(scale.get("minNodeCount") or 0),
        int(scale.get("maxNodeCount") or 0),
        node.get("vmPriority", "Dedicated"),
    )


def estimate(doc: dict[str, Any], prices: Prices | None = None) -> Estimate:
    prices = prices or load_prices()
    est = Estimate(doc["stack"])
    hours = prices.hours_per_month
    for res in doc["resources"]:
        inputs, kind = res["inputs"], res["type"]
        if kind == COMPUTE:
            size, low, high, priority = _scale(res)
            name = inputs.get("computeName", res["name"])
            price = prices.vm(size) if isinstance(size, str) else None
            if price is None:
                est.unpriced.append(f"{name}: VM size {size} has no price in prices.yaml")
                est.lines.append(Line(f"cluster {name}", f"{high} x {size} (no price)", None, None))
                continue
            detail = f"{high} x {size} at {price:.3f}/node-h, min {low}"
            if priority == "LowPriority":
                detail += " (low priority, priced as dedicated: an upper bound)"
            est.lines.append(Line(f"cluster {name}", detail, price * high, price * low * hours))
        elif kind == "azure-native:storage:FileShare":
            gib = float(inputs.get("shareQuota") or 0)
            rate = prices.storage_monthly_per_gib["premiumFileProvisioned"]
            monthly = gib * rate
            detail = f"{gib:g} GiB provisioned at {rate}/GiB-month"
            item = f"file share {inputs.get('shareName', res['name'])}"
            est.lines.append(Line(item, detail, monthly / hours, monthly))
        elif kind == "azure-native:containerregistry:Registry":
            tier = inputs.get("sku", {}).get("name")
            daily = prices.registry_daily.get(tier)
            item = f"registry {inputs.get('registryName', res['name'])}"
            if daily is None:
                est.unpriced.append(f"{item}: tier {tier} has no price")
                continue
            monthly = daily * hours / 24
            est.lines.append(Line(item, f"{tier} tier at {daily}/day", daily / 24, monthly))
        elif (
            kind == "azure-native:storage:StorageAccount"
            and inputs.get("kind") == "BlockBlobStorage"
        ):
            rate = prices.storage_monthly_per_gib["premiumBlockBlobStored"]
            est.notes.append(
                f"premium blob account {inputs.get('accountName', res['name'])}: {rate} USD per "
                "GiB-month stored "
                f"(ImageNet TFRecords, ~145 GiB: {145 * rate:.2f} USD/month); not in the totals"
            )
    est.notes.append(prices.label)
    return est


def throughput_from(path: Path) -> dict[str, Any]:
    """The last `azdl.throughput/v1` record in a job log or JSON-lines file."""
    try:
        records = parse_throughput_lines(Path(path).read_text())
    except FileNotFoundError:
        raise AzdlError(f"{path}: no such throughput file") from None
    if not records:
        raise AzdlError(f'{path}: no line with "schema": "azdl.throughput/v1" in it')
    return records[-1]


def add_epoch_cost(
    est: Estimate,
    doc: dict[str, Any],
    images_per_sec: float,
    workers: int | None,
    images_per_epoch: int = IMAGENET_TRAIN_IMAGES,
    prices: Prices | None = None,
) -> None:
    """Cost of one epoch on the stack's training cluster at the measured images/sec.
    `workers` (GPUs) sets the node count; without it the cluster runs at max nodes."""
    if images_per_sec <= 0:
        raise AzdlError(f"images/sec must be positive, got {images_per_sec}")
    prices = prices or load_prices()
    name = doc["outputs"].get("clusterName")
    clusters = [r for r in doc["resources"] if r["type"] == COMPUTE]
    cluster = next((r for r in clusters if r["inputs"].get("computeName") == name), None)
    if cluster is None:
        raise AzdlError(f"stack {doc['stack']} declares no training cluster to price an epoch on")
    size, _low, high, _priority = _scale(cluster)
    price = prices.vm(size)
    gpus = VM_SIZES[size].gpus if size in VM_SIZES else 0
    nodes = high if not workers else max(1, math.ceil(workers / max(gpus, 1)))
    hours = images_per_epoch / images_per_sec / 3600
    est.epoch = {
        "images_per_sec": images_per_sec,
        "images_per_epoch": images_per_epoch,
        "nodes": nodes,
        "vm_size": size,
        "hours": hours,
        "usd": None if price is None else hours * nodes * price,
    }
    if price is None:
        est.unpriced.append(f"epoch cost: VM size {size} has no price in prices.yaml")
    if nodes > high:
        est.notes.append(
            f"the throughput was measured on {workers} GPUs = {nodes} nodes of {size}, more than "
            f"this stack's cluster.maxNodes ({high})"
        )
