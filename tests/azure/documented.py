"""Azure ML's REST answers as azure-rest-api-specs documents them (tests/azure/data: each file
names its example and commit), and the stack's H100 size and quota lines in the same shapes."""

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
H100_FAMILY_USAGE = "Standard NDSH100v5 Family Cluster Dedicated vCPUs"


def documented(name: str) -> list[dict]:
    """The `value` list of a documented listing in tests/azure/data."""
    return json.loads((DATA / name).read_text())["value"]


def h100_size() -> dict:
    """The documented VM size entry, for the stack's ND96isr_H100_v5 (family as Azure names
    it)."""
    return documented("vm_sizes_list.json")[0] | {
        "name": "Standard_ND96isr_H100_v5", "family": "standardNDSH100v5Family", "vCPUs": 96,
        "gpus": 8}  # fmt: skip


def h100_usages(used: int, limit: int = 192) -> list[dict]:
    """The regional total (1000 free) and the H100 family's line with `used` of `limit` cores,
    in the documented usage shape."""
    family = documented("usage_list.json")[1] | {
        "id": "/subscriptions/sub-1/usages/Standard_NDSH100v5_Family_Cluster_Dedicated_vCPUs",
        "currentValue": used,
        "limit": limit,
        "name": {"value": H100_FAMILY_USAGE, "localizedValue": H100_FAMILY_USAGE},
    }
    regional = documented("usage_list.json")[0] | {"currentValue": 0, "limit": 1000}
    return [regional, family]
