"""Cost estimate of a plan, from what it declares and `prices.yaml` (an estimate, labelled).

Clusters: price per node-hour × max nodes (the ceiling) and × min nodes (the idle floor).
NFS share: provisioned GiB × premium-file price. Registry: its tier's daily price. Premium
blob data is billed on what is stored, so only its rate is shown. A VM size without a price,
or a size, node count, quota or tier known only after deployment, is reported as unpriced
with the reason, never counted as zero; the totals then are lower bounds. Given a measured
throughput, the cost of one epoch on the training cluster.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azdl.errors import AzdlError
from azdl.review import manifest as mf
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
        """The priced lines only: a lower bound when `unpriced_lines` is not 0."""
        return sum(x.max_per_hour or 0.0 for x in self.lines)

    @property
    def idle_per_month(self) -> float:
        return sum(x.idle_per_month or 0.0 for x in self.lines)

    @property
    def unpriced_lines(self) -> int:
        return sum(1 for x in self.lines if x.max_per_hour is None)

    def add_unpriced(self, item: str, detail: str, reason: str) -> None:
        self.unpriced.append(f"{item}: {reason}")
        self.lines.append(Line(item, detail, None, None))


def _scale(res: dict[str, Any]) -> tuple[Any, Any, Any, str]:
    """(VM size, min nodes, max nodes, priority) of a cluster; each may be an unknown marker."""
    node = res["inputs"].get("properties", {}).get("properties", {})
    scale = node.get("scaleSettings", {})
    return (
        node.get("vmSize"),
        scale.get("minNodeCount") or 0,
        scale.get("maxNodeCount") or 0,
        node.get("vmPriority", "Dedicated"),
    )


def _not_known(**values: Any) -> str | None:
    """'x, y not known until deploy' for the values that are unknown markers, else None."""
    unknown = [k for k, v in values.items() if mf.is_unknown(v)]
    return f"{', '.join(unknown)} not known until deploy" if unknown else None


def estimate(doc: dict[str, Any], prices: Prices | None = None) -> Estimate:
    prices = prices or load_prices()
    est = Estimate(doc["stack"])
    hours = prices.hours_per_month
    for res in doc["resources"]:
        inputs, kind = res["inputs"], res["type"]
        if kind == COMPUTE:
            size, low, high, priority = _scale(res)
            item = f"cluster {inputs.get('computeName', res['name'])}"
            unknown = _not_known(vmSize=size, minNodeCount=low, maxNodeCount=high)
            if unknown:
                est.add_unpriced(item, "(not known until deploy)", unknown)
                continue
            price = prices.vm(size) if isinstance(size, str) else None
            if price is None:
                est.add_unpriced(item, f"{high} x {size} (no price)", prices.no_vm_price(size))
                continue
            detail = f"{high} x {size} at {price:.3f}/node-h, min {low}"
            if priority == "LowPriority":
                detail += " (low priority, priced as dedicated: an upper bound)"
            est.lines.append(Line(item, detail, price * high, price * low * hours))
        elif kind == "azure-native:storage:FileShare":
            item = f"file share {inputs.get('shareName', res['name'])}"
            quota = inputs.get("shareQuota") or 0
            if mf.is_unknown(quota):
                est.add_unpriced(item, "(not known until deploy)", _not_known(shareQuota=quota))
                continue
            rate = prices.storage_monthly_per_gib["premiumFileProvisioned"]
            monthly = float(quota) * rate
            detail = f"{float(quota):g} GiB provisioned at {rate}/GiB-month"
            est.lines.append(Line(item, detail, monthly / hours, monthly))
        elif kind == "azure-native:containerregistry:Registry":
            item = f"registry {inputs.get('registryName', res['name'])}"
            sku = inputs.get("sku", {})
            tier = sku if mf.is_unknown(sku) else sku.get("name")
            if mf.is_unknown(tier):
                est.add_unpriced(item, "(not known until deploy)", _not_known(sku=tier))
                continue
            daily = prices.registry_daily.get(tier)
            if daily is None:
                est.add_unpriced(item, f"{tier} tier (no price)", f"tier {tier} has no price")
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
    unknown = _not_known(vmSize=size, maxNodeCount=None if workers else high)
    if unknown:
        est.unpriced.append(f"epoch cost: {unknown} on cluster {name}")
        return
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
        est.unpriced.append(f"epoch cost: {prices.no_vm_price(size)}")
    if not mf.is_unknown(high) and nodes > high:
        est.notes.append(
            f"the throughput was measured on {workers} GPUs = {nodes} nodes of {size}, more than "
            f"this stack's cluster.maxNodes ({high})"
        )
