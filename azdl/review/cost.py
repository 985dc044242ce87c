"""Cost estimate of a plan, from what it declares and a price file (an estimate, labelled).

`PRICING` says, per resource type, how the estimate takes it: priced, billed on use (a note
outside the totals) or free of charge of its own. A type not there, a missing price or a value
known only after deploy is reported as unpriced with the reason, never counted as zero.
"""

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azdl.errors import AzdlError
from azdl.review import arm
from azdl.review import manifest as mf
from azdl.review.prices import Prices, load_prices
from infra import azure_facts
from infra.catalogue import VM_SIZES
from training.throughput import parse_throughput_lines

IMAGENET_TRAIN_IMAGES = 1_281_167
# A FileStorage account as the estimate takes it: billed through its provisioned file share.
FILE_STORAGE_ACCOUNT = f"{azure_facts.STORAGE_ACCOUNT} (FileStorage)"
DISK_TIERS = {"Standard_LRS": "S", "StandardSSD_LRS": "E", "Premium_LRS": "P"}


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
    # resource key -> how the estimate took it: priced, usage (rate noted), free, unpriced
    accounted: dict[str, str] = field(default_factory=dict)

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


def region_of(doc: dict[str, Any]) -> str | None:
    """The stack's region: `azdl:location`, else the first regional resource's location."""
    location = doc.get("config", {}).get("azdl:location")
    if isinstance(location, str):
        return location
    for res in doc["resources"]:
        where = res["inputs"].get("location")
        if isinstance(where, str) and where != "global":
            return where
    return None


def _fixed(
    est: Estimate,
    prices: Prices,
    item: str,
    detail: str,
    key: str,
    count: int = 1,
    monthly: bool = False,
) -> None:
    """A resource billed by the hour (or month) whether used or not."""
    table = prices.fixed_monthly if monthly else prices.fixed_hourly
    price = table.get(key)
    if price is None:
        where = "fixedMonthly" if monthly else "fixedHourly"
        est.add_unpriced(
            item, f"{detail} (no price)", f"no {where}.{key} price for {prices.region}"
        )
        return
    hours = prices.hours_per_month
    per_month = count * (price if monthly else price * hours)
    unit = "/month" if monthly else "/h"
    est.lines.append(
        Line(
            item,
            f"{detail} at {price}{unit} each" if count > 1 else f"{detail} at {price}{unit}",
            per_month / hours,
            per_month,
        )
    )


def _name(value: Any, logical: str) -> str:
    """A resource's Azure name for a note; its logical name where Azure's is known only after
    deploy (the Key Vault's ends in the deployment id)."""
    return logical if value is None or mf.is_unknown(value) else str(value)


def _usage_note(prices: Prices, what: str, key: str, unit: str) -> str:
    rate = prices.usage.get(key)
    shown = f"{rate} USD {unit}" if rate is not None else f"no usage.{key} price"
    return f"{what}: {shown}, billed on use; not in the totals"


def _os_disk(prices: Prices, inputs: dict[str, Any]) -> tuple[float | None, str]:
    disk = inputs.get("storageProfile", {}).get("osDisk", {})
    kind = disk.get("managedDisk", {}).get("storageAccountType", "Premium_LRS")
    size = disk.get("diskSizeGB", 30)
    tier = DISK_TIERS.get(kind) if isinstance(kind, str) else None
    if tier is None or not isinstance(size, int | float) or size > 32:
        return (
            None,
            f"OS disk {kind} {size} GiB has no price (up to 32 GiB of {', '.join(DISK_TIERS)})",
        )
    key = f"{kind}_{tier}4"
    price = prices.managed_disk_monthly.get(key)
    if price is None:
        return None, f"no managedDiskMonthly.{key} price for {prices.region}"
    return price, f"{kind} {size:g} GiB OS disk at {price}/month"


# ---- how each resource type is priced: one function per type, the table after them ---------


def _cluster(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per node-hour: x max nodes is the ceiling, x min nodes the idle floor."""
    inputs = res["inputs"]
    size, low, high, priority = _scale(res)
    item = f"cluster {inputs.get('computeName', res['name'])}"
    unknown = _not_known(vmSize=size, minNodeCount=low, maxNodeCount=high)
    if unknown:
        est.add_unpriced(item, "(not known until deploy)", unknown)
        return
    price = prices.vm(size) if isinstance(size, str) else None
    if price is None:
        est.add_unpriced(item, f"{high} x {size} (no price)", prices.no_vm_price(size))
        return
    detail = f"{high} x {size} at {price:.3f}/node-h, min {low}"
    if priority == "LowPriority":
        detail += " (low priority, priced as dedicated: an upper bound)"
    est.lines.append(Line(item, detail, price * high, price * low * prices.hours_per_month))


def _file_share(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per provisioned GiB (a premium share bills its quota, used or not)."""
    inputs, hours = res["inputs"], prices.hours_per_month
    item = f"file share {inputs.get('shareName', res['name'])}"
    quota = inputs.get("shareQuota") or 0
    if mf.is_unknown(quota):
        est.add_unpriced(item, "(not known until deploy)", _not_known(shareQuota=quota))
        return
    rate = prices.storage_monthly_per_gib.get("premiumFileProvisioned")
    if rate is None:
        est.add_unpriced(
            item, f"{quota} GiB (no price)", f"no premium file price for {prices.region}"
        )
        return
    monthly = float(quota) * rate
    detail = f"{float(quota):g} GiB provisioned at {rate}/GiB-month"
    est.lines.append(Line(item, detail, monthly / hours, monthly))


def _registry(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per day by tier; storage beyond the tier's included GiB is billed on use."""
    inputs, hours = res["inputs"], prices.hours_per_month
    item = f"registry {arm.arm_name(res['type'], inputs, 'registryName') or res['name']}"
    sku = inputs.get("sku", {})
    tier = sku if mf.is_unknown(sku) else sku.get("name")
    if mf.is_unknown(tier):
        est.add_unpriced(item, "(not known until deploy)", _not_known(sku=tier))
        return
    daily = prices.registry_daily.get(tier)
    if daily is None:
        est.add_unpriced(item, f"{tier} tier (no price)", f"tier {tier} has no price")
        return
    monthly = daily * hours / 24
    est.lines.append(Line(item, f"{tier} tier at {daily}/day", daily / 24, monthly))
    est.notes.append(
        _usage_note(
            prices,
            f"registry {item.split()[-1]} storage beyond the tier's included GiB",
            "registryStoragePerGiBMonth",
            "per GiB-month",
        )
    )


def _nat_gateway(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per hour; the data through it is billed on use."""
    _fixed(est, prices, f"NAT gateway {res['name']}", "Standard", "natGateway")
    est.notes.append(
        _usage_note(prices, "data through the NAT gateway", "natGatewayPerGB", "per GB processed")
    )


def _public_ip(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per hour, Standard static addresses only (the others have no price here)."""
    inputs = res["inputs"]
    sku = inputs.get("sku", {}).get("name", "Basic")
    method = inputs.get("publicIPAllocationMethod", "Dynamic")
    item = f"public IP {res['name']}"
    if sku == "Standard" and method == "Static":
        _fixed(est, prices, item, "Standard static", "publicIpStandardStatic")
    else:
        est.add_unpriced(item, f"{sku} {method} (no price)", f"no price for {sku} {method} IPs")


def _bastion(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per hour by tier."""
    sku = res["inputs"].get("sku", {}).get("name", "Standard")
    item = f"Bastion {res['name']}"
    if mf.is_unknown(sku):
        est.add_unpriced(item, "(not known until deploy)", _not_known(sku=sku))
    else:
        _fixed(est, prices, item, f"{sku} tier", f"bastion{sku}")


def _virtual_machine(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per hour, always running, plus its OS disk per month."""
    inputs, hours = res["inputs"], prices.hours_per_month
    size = inputs.get("hardwareProfile", {}).get("vmSize")
    item = f"VM {inputs.get('vmName', res['name'])}"
    price = prices.vm(size) if isinstance(size, str) else None
    disk, disk_detail = _os_disk(prices, inputs)
    if price is None or disk is None:
        why = prices.no_vm_price(size) if price is None else disk_detail
        est.add_unpriced(item, f"{size} (no price)", why)
        return
    monthly = price * hours + disk
    est.lines.append(
        Line(item, f"{size} at {price}/h, runs always; {disk_detail}", monthly / hours, monthly)
    )


def _private_endpoints(est: Estimate, prices: Prices, count: int) -> None:
    """Per endpoint-hour, one line for all; the data through them is billed on use."""
    _fixed(est, prices, "private endpoints", f"{count} endpoints", "privateEndpoint", count=count)
    est.notes.append(
        _usage_note(
            prices, "data through private endpoints", "privateEndpointPerGB", "per GB in and out"
        )
    )


def _private_zones(est: Estimate, prices: Prices, count: int) -> None:
    """Per zone-month, one line for all (DNS queries are billed on use)."""
    _fixed(
        est, prices, "private DNS zones", f"{count} zones", "privateDnsZone", count, monthly=True
    )


def _log_analytics(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    name = res["inputs"].get("workspaceName", res["name"])
    est.notes.append(
        _usage_note(prices, f"Log Analytics {name}", "logAnalyticsPerGB", "per GB ingested")
    )


def _task_run(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    est.notes.append(
        f"ACR Tasks build {res['inputs'].get('taskRunName', res['name'])}: billed per second "
        "of build time when the image's inputs change; not in the totals"
    )


def _key_vault(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    est.notes.append(
        _usage_note(
            prices,
            f"Key Vault {_name(res['inputs'].get('vaultName'), res['name'])}",
            "keyVaultPer10kOperations",
            "per 10,000 operations",
        )
    )


def _storage_account(est: Estimate, prices: Prices, res: dict[str, Any]) -> None:
    """Per GiB stored (a FileStorage account is FILE_STORAGE_ACCOUNT: free of its own)."""
    inputs = res["inputs"]
    name = inputs.get("accountName", res["name"])
    account = inputs.get("kind")
    if account == "BlockBlobStorage":
        rate = prices.storage_monthly_per_gib.get("premiumBlockBlobStored")
        est.notes.append(
            f"premium blob account {name}: {rate} USD per GiB-month stored "
            f"(ImageNet TFRecords, ~145 GiB: {145 * (rate or 0):.2f} USD/month); "
            "not in the totals"
        )
        return
    sku = inputs.get("sku", {}).get("name", "Standard_LRS")
    sku = sku if isinstance(sku, str) else "Standard_LRS"  # known from config
    key = f"standardBlobHot{sku.rsplit('_', 1)[-1].capitalize()}Stored"
    rate = prices.storage_monthly_per_gib.get(key)
    shown = f"{rate} USD" if rate is not None else f"no storageMonthlyPerGiB.{key}"
    est.notes.append(
        f"outputs account {name} ({account}, {sku}): {shown} per GiB-month stored, "
        "billed on use; not in the totals"
    )


@dataclass(frozen=True)
class Pricing:
    """How the estimate takes one resource type: `how` it is accounted (priced; usage, its rate
    a note outside the totals; free), and what adds its lines and notes: a function called for
    `each` resource, or one called once for all of them `together` with their count."""

    how: str
    each: Callable[[Estimate, Prices, dict[str, Any]], None] | None = None
    together: Callable[[Estimate, Prices, int], None] | None = None
    free: str = ""  # why it has no charge of its own


def _free(why: str) -> Pricing:
    return Pricing("free", free=why)


# Every resource type a plan may declare, as `_pricing_kind` names it. The `together` lines
# follow every resource's own, in this order. Sources: the Azure pricing pages in prices.yaml.
PRICING: dict[str, Pricing] = {
    azure_facts.ML_COMPUTE: Pricing("priced", each=_cluster),
    azure_facts.FILE_SHARE: Pricing("priced", each=_file_share),
    azure_facts.REGISTRY: Pricing("priced", each=_registry),
    azure_facts.NAT_GATEWAY: Pricing("priced", each=_nat_gateway),
    azure_facts.PUBLIC_IP_ADDRESS: Pricing("priced", each=_public_ip),
    azure_facts.BASTION_HOST: Pricing("priced", each=_bastion),
    azure_facts.VIRTUAL_MACHINE: Pricing("priced", each=_virtual_machine),
    azure_facts.PRIVATE_ENDPOINT: Pricing("priced", together=_private_endpoints),
    azure_facts.PRIVATE_DNS_ZONE: Pricing("priced", together=_private_zones),
    azure_facts.LOG_ANALYTICS_WORKSPACE: Pricing("usage", each=_log_analytics),
    azure_facts.KEY_VAULT: Pricing("usage", each=_key_vault),
    azure_facts.STORAGE_ACCOUNT: Pricing("usage", each=_storage_account),
    azure_facts.TASK_RUN: Pricing("usage", each=_task_run),
    azure_facts.TASK: _free(
        "a task definition is free; ACR Tasks bill the build time of its runs (the TaskRun, usage)"
    ),
    FILE_STORAGE_ACCOUNT: _free("billed through its provisioned file share"),
    azure_facts.RESOURCE_GROUP: _free("resource groups are free"),
    azure_facts.VIRTUAL_NETWORK: _free("virtual networks are free (peering would be billed)"),
    azure_facts.SUBNET: _free("part of the free virtual network"),
    azure_facts.NETWORK_SECURITY_GROUP: _free("network security groups are free"),
    azure_facts.NETWORK_INTERFACE: _free("network interfaces are free"),
    azure_facts.PRIVATE_DNS_ZONE_GROUP: _free("DNS settings of a private endpoint"),
    azure_facts.VIRTUAL_NETWORK_LINK: _free(
        "no charge of its own; DNS queries are billed per million (usage)"
    ),
    azure_facts.ROLE_ASSIGNMENT: _free("role assignments are free"),
    azure_facts.USER_ASSIGNED_IDENTITY: _free("managed identities are free"),
    azure_facts.ML_WORKSPACE: _free(
        "Azure ML charges no fee for the workspace, only for compute and the services it uses "
        "(priced separately)"
    ),
    azure_facts.ML_DATASTORE: _free("a workspace setting"),
    azure_facts.ML_ENVIRONMENT_CONTAINER: _free("a workspace setting"),
    azure_facts.ML_ENVIRONMENT_VERSION: _free("a workspace setting"),
    azure_facts.BLOB_CONTAINER: _free("billed through its storage account"),
    azure_facts.APPLICATION_INSIGHTS: _free(
        "workspace-based: its data is billed as Log Analytics ingestion"
    ),
    azure_facts.VIRTUAL_MACHINE_EXTENSION: _free("the Entra ID login extension is free"),
    azure_facts.DIAGNOSTIC_SETTING: _free(
        "no charge of its own; the logs it sends are billed as Log Analytics ingestion (usage)"
    ),
    azure_facts.BLOB_SERVICE_PROPERTIES: _free(
        "settings of its storage account; soft-deleted blobs and versions are billed as the "
        "account's storage"
    ),
    azure_facts.MANAGEMENT_POLICY: _free(
        "lifecycle rules are free (their actions are billed as the account's operations)"
    ),
    "pulumi-python:dynamic:Resource": _free(
        "uploads an image's build context to ACR Tasks' own source storage"
    ),
    "random:index/randomId:RandomId": _free("a value kept in the stack's state"),
}


def _pricing_kind(res: dict[str, Any]) -> str:
    """The table's key for `res`: its type; the registry's for the generic ARM form of it
    (infra/registry.py); FILE_STORAGE_ACCOUNT for a FileStorage account."""
    kind, inputs = res["type"], res["inputs"]
    if arm.is_registry(kind, inputs):
        return azure_facts.REGISTRY
    if kind == azure_facts.STORAGE_ACCOUNT and inputs.get("kind") == "FileStorage":
        return FILE_STORAGE_ACCOUNT
    return kind


def estimate(doc: dict[str, Any], prices: Prices | None = None) -> Estimate:
    prices = prices or load_prices(region=region_of(doc))
    est = Estimate(doc["stack"])
    counts: Counter[str] = Counter()
    for res in doc["resources"]:
        if not res.get("custom", True):
            continue  # components (azdl:infra:*) and the stack group resources, they bill nothing
        kind = _pricing_kind(res)
        pricing = PRICING.get(kind)
        if pricing is None:
            est.accounted[res["key"]] = "unpriced"
            est.add_unpriced(
                f"{kind.rsplit(':', 1)[-1]} {res['name']}",
                "(unknown resource type)",
                f"no price rule for {kind} in azdl/review/cost.py",
            )
            continue
        est.accounted[res["key"]] = pricing.how
        counts[kind] += 1
        if pricing.each:
            pricing.each(est, prices, res)
    for kind, pricing in PRICING.items():
        if pricing.together and counts[kind]:
            pricing.together(est, prices, counts[kind])
    free = sorted((kind, counts[kind], p.free) for kind, p in PRICING.items() if p.free)
    named = "; ".join(f"{n} x {kind.split(':', 2)[-1]} ({why})" for kind, n, why in free if n)
    if named:
        est.notes.append(f"no charge of their own: {named}")
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
    prices = prices or load_prices(region=region_of(doc))
    name = doc["outputs"].get("clusterName")
    clusters = [r for r in doc["resources"] if r["type"] == azure_facts.ML_COMPUTE]
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
