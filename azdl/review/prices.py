"""The price list (`prices.yaml`): an estimate with its date and source region.

Pure Python + PyYAML so the policy pack can read it too. A size without a price is `None`,
never zero: callers report it as unpriced.
"""

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

PRICES_FILE = Path(__file__).with_name("prices.yaml")


@dataclass(frozen=True)
class Prices:
    date: str
    source_region: str
    source: str
    vm_hourly: dict[str, float]
    vm_unpriced: dict[str, str]  # size -> why it has no price
    storage_monthly_per_gib: dict[str, float]
    registry_daily: dict[str, float]
    hours_per_month: float

    def vm(self, size: str) -> float | None:
        return self.vm_hourly.get(size)

    def no_vm_price(self, size: str) -> str:
        """Why `size` is unpriced, for messages."""
        why = self.vm_unpriced.get(size)
        return f"VM size {size} has no price in prices.yaml" + (f" ({why})" if why else "")

    @property
    def label(self) -> str:
        return f"estimate: {self.source_region} list prices as of {self.date} ({self.source})"


@cache
def load_prices(path: Path = PRICES_FILE) -> Prices:
    raw = yaml.safe_load(Path(path).read_text())
    return Prices(
        date=str(raw["date"]),
        source_region=raw["sourceRegion"],
        source=raw["source"],
        vm_hourly={k: float(v) for k, v in raw["vmHourly"].items()},
        vm_unpriced={k: str(v) for k, v in (raw.get("vmUnpriced") or {}).items()},
        storage_monthly_per_gib={k: float(v) for k, v in raw["storageMonthlyPerGiB"].items()},
        registry_daily={k: float(v) for k, v in raw["registryDaily"].items()},
        hours_per_month=float(raw["hoursPerMonth"]),
    )
