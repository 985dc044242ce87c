"""The VM-size catalogue (`vm_sizes.yaml`): what each cluster size offers a training job.

Pure Python + PyYAML (no Pulumi import) so the CLI and job tools can read it cheaply. The
config validates `cluster.vmSize` against it, and the job tools take processes-per-node
(`gpus`) and the InfiniBand flag from it.
"""

from dataclasses import dataclass
from pathlib import Path

import yaml

CATALOGUE_FILE = Path(__file__).with_name("vm_sizes.yaml")


@dataclass(frozen=True)
class VmSize:
    name: str
    gpus: int
    gpu_model: str | None
    gpu_memory_gib: int
    vcpus: int
    infiniband: bool
    infiniband_hcas: int | None = None  # InfiniBand HCAs per node, where Azure says


class UnknownVmSize(KeyError):
    """A VM size that is not in the catalogue; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def _load() -> dict[str, VmSize]:
    raw = yaml.safe_load(CATALOGUE_FILE.read_text())
    return {name: VmSize(name=name, **fields) for name, fields in raw.items()}


VM_SIZES: dict[str, VmSize] = _load()


def get_vm_size(name: str) -> VmSize:
    """The catalogue entry for `name` (exact Azure spelling, e.g. `Standard_ND96isr_H100_v5`)."""
    try:
        return VM_SIZES[name]
    except KeyError:
        known = ", ".join(sorted(VM_SIZES))
        raise UnknownVmSize(f"unknown VM size {name!r}; known sizes: {known}") from None
