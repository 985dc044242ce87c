"""Published NCCL all-reduce baselines per VM size (`nccl_baselines.yaml`).

Pure Python + PyYAML, like the VM-size catalogue: the job tools' health gate reads the warn/fail
levels, `azdl estimate` reads the expected bus bandwidth for its communication model.
"""

from dataclasses import dataclass
from pathlib import Path

import yaml

BASELINES_FILE = Path(__file__).with_name("nccl_baselines.yaml")


@dataclass(frozen=True)
class Level:
    expected_gbps: float
    source: str
    warn_below_gbps: float | None = None
    fail_below_gbps: float | None = None


@dataclass(frozen=True)
class NcclBaseline:
    vm_size: str
    message_bytes: int
    single_node: Level | None
    multi_node: Level | None
    ib_write_bw_gdr_gbps: float | None = None  # each HCA's GPUDirect RDMA loopback, Gb/s


def _load() -> dict[str, NcclBaseline]:
    raw = yaml.safe_load(BASELINES_FILE.read_text())
    return {
        name: NcclBaseline(
            vm_size=name,
            message_bytes=int(entry["message_bytes"]),
            single_node=Level(**entry["single_node"]) if "single_node" in entry else None,
            multi_node=Level(**entry["multi_node"]) if "multi_node" in entry else None,
            ib_write_bw_gdr_gbps=entry.get("ib_write_bw_gdr_gbps"),
        )
        for name, entry in raw.items()
    }


NCCL_BASELINES: dict[str, NcclBaseline] = _load()


def baseline(vm_size: str) -> NcclBaseline | None:
    """The published baseline for `vm_size`, or None where Azure publishes none."""
    return NCCL_BASELINES.get(vm_size)
