"""The price list (`prices.yaml`, or a file of the user's): per region, dated, with its sources.

Pure Python + PyYAML so the policy pack can read it too. A price that is missing is `None`,
never zero: callers report the item as unpriced. `AZDL_PRICES` names another file (the policy
pack runs in Pulumi's process, where `azdl plan --prices` cannot reach).
"""

import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from azdl.errors import AzdlError

PRICES_FILE = Path(__file__).with_name("prices.yaml")
PRICES_ENV = "AZDL_PRICES"
SECTIONS = ("vmHourly", "storageMonthlyPerGiB", "registryDaily", "fixedHourly", "fixedMonthly",
            "managedDiskMonthly", "usage", "vmHourlyLowPriority")  # fmt: skip


@dataclass(frozen=True)
class Prices:
    """One region's prices."""

    file: str
    region: str
    date: str
    source: str  # provenance and where the figures come from
    vm_hourly: dict[str, float]
    vm_unpriced: dict[str, str]  # size -> why it has no price
    storage_monthly_per_gib: dict[str, float]
    registry_daily: dict[str, float]
    fixed_hourly: dict[str, float]
    fixed_monthly: dict[str, float]
    managed_disk_monthly: dict[str, float]
    usage: dict[str, float]
    hours_per_month: float
    known: bool = True  # False: the file has no block for this region (everything unpriced)
    # Azure ML low-priority node prices; a size missing here has no low-priority price recorded
    vm_hourly_low_priority: dict[str, float] = field(default_factory=dict)

    @property
    def source_region(self) -> str:
        return self.region

    def vm(self, size: str) -> float | None:
        return self.vm_hourly.get(size)

    def vm_low_priority(self, size: str) -> float | None:
        return self.vm_hourly_low_priority.get(size)

    def node_hourly(self, size: str, low_priority: bool = False) -> tuple[float | None, str]:
        """One node's price per hour and a note on it (None: unpriced, the note says why):
        `azdl estimate`, `azdl submit --max-cost` and `azdl jobs` price a job's nodes here."""
        dedicated = self.vm(size)
        if dedicated is None:
            return None, self.no_vm_price(size)
        if not low_priority:
            return dedicated, ""
        low = self.vm_low_priority(size)
        if low is None:
            return dedicated, (
                "no low-priority price in the table: priced as dedicated, an upper bound"
            )
        return low, ""

    def offers(self, size: str) -> bool:
        """Whether the table lists `size` in this region, priced or with why it is not."""
        return size in self.vm_hourly or size in self.vm_unpriced

    def no_vm_price(self, size: str) -> str:
        """Why `size` is unpriced, for messages."""
        if not self.known:
            return f"VM size {size} has no price: {self.file} has no prices for {self.region}"
        why = self.vm_unpriced.get(size)
        where = "prices.yaml" if self.file == str(PRICES_FILE) else self.file
        return f"VM size {size} has no price in {where}" + (f" ({why})" if why else "")

    @property
    def label(self) -> str:
        if not self.known:
            return f"no prices for region {self.region} in {self.file}: everything is unpriced"
        return f"estimate: {self.region} list prices as of {self.date} ({self.source})"


def prices_path(path: Path | str | None = None) -> Path:
    return Path(path or os.environ.get(PRICES_ENV) or PRICES_FILE)


@cache
def _read(path: Path) -> dict:
    if path.is_dir():
        raise AzdlError(
            f"price file {path} is a folder; expected a YAML file in the layout of {PRICES_FILE} "
            f"(--prices FILE, or ${PRICES_ENV})"
        )
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise AzdlError(f"price file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise AzdlError(f"price file {path}: not YAML ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("regions"), dict):
        raise AzdlError(
            f"price file {path}: expected a mapping with `regions:` (see {PRICES_FILE})"
        )
    return raw


def _numbers(path: Path, region: str, name: str, values) -> dict[str, float]:
    if values is None:
        return {}
    try:
        out = {str(k): float(v) for k, v in dict(values).items()}
    except (TypeError, ValueError):
        raise AzdlError(
            f"price file {path}: regions.{region}.{name} must map names to numbers"
        ) from None
    if any(v < 0 for v in out.values()):
        raise AzdlError(f"price file {path}: regions.{region}.{name} has a negative price")
    return out


def regions(path: Path | str | None = None) -> tuple[str, ...]:
    return tuple(_read(prices_path(path))["regions"])


def load_prices(path: Path | str | None = None, region: str | None = None) -> Prices:
    """The prices of `region` (default: the file's defaultRegion) from `path` (default:
    $AZDL_PRICES, else prices.yaml)."""
    file = prices_path(path)
    raw = _read(file)
    region = region or raw.get("defaultRegion") or next(iter(raw["regions"]))
    block = raw["regions"].get(region)
    source = raw.get("provenance", "") + (f"; sources: {file.name}" if raw.get("sources") else "")
    if block is None:
        return Prices(str(file), region, "", source, {}, {}, {}, {}, {}, {}, {}, {},
                      float(raw.get("hoursPerMonth", 730)), known=False)  # fmt: skip
    stand_in = block.get("standIn") or {}
    borrowed = tuple(stand_in.get("sections") or ())
    if borrowed:
        other = raw["regions"].get(stand_in.get("region"))
        if not isinstance(other, dict):
            raise AzdlError(f"price file {file}: regions.{region}.standIn.region names no region")
        block = {**block, **{name: other.get(name) for name in borrowed}}
        source += (
            f"; {', '.join(borrowed)} are {stand_in['region']} figures standing in for "
            f"{region}'s own"
        )
    sections = {name: _numbers(file, region, name, block.get(name)) for name in SECTIONS}
    return Prices(
        file=str(file),
        region=region,
        date=str(block.get("date", "undated")),
        source=source,
        vm_hourly=sections["vmHourly"],
        vm_unpriced={k: str(v) for k, v in (block.get("vmUnpriced") or {}).items()},
        storage_monthly_per_gib=sections["storageMonthlyPerGiB"],
        registry_daily=sections["registryDaily"],
        fixed_hourly=sections["fixedHourly"],
        fixed_monthly=sections["fixedMonthly"],
        managed_disk_monthly=sections["managedDiskMonthly"],
        usage=sections["usage"],
        hours_per_month=float(raw.get("hoursPerMonth", 730)),
        vm_hourly_low_priority=sections["vmHourlyLowPriority"],
    )
