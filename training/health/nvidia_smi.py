"""nvidia-smi's GPU query, parsed: how many GPUs a node shows, and their ECC state.

The query is `nvidia-smi --query-gpu=QUERY --format=csv,noheader` (fields from
`nvidia-smi --help-query-gpu`); Azure's node health checks read the same counters
(Azure/azurehpc-health-checks, customTests/azure_gpu_count.nhc and azure_gpu_ecc.nhc, commit
0e0a1ac, 2026-05-01): a node with fewer GPUs than its size, or with uncorrectable ECC errors,
is unhealthy.
"""

from dataclasses import dataclass

FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
)
COMMAND = ("nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader")


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    bus_id: str
    ecc_mode: str  # Enabled | Disabled | [N/A]
    uncorrected_errors: int | None  # None where nvidia-smi says [N/A]


def parse(text: str) -> list[Gpu]:
    """One Gpu per CSV line of the query's output."""
    gpus = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(FIELDS):
            raise ValueError(f"nvidia-smi line {line!r}: expected {len(FIELDS)} fields {FIELDS}")
        index, name, bus_id, ecc_mode, errors = cells
        gpus.append(
            Gpu(int(index), name, bus_id, ecc_mode, int(errors) if errors.isdigit() else None)
        )
    return gpus


def problems(gpus: list[Gpu], expected_count: int) -> list[str]:
    """What is wrong with a node's GPUs for a size of `expected_count` data-centre GPUs (ECC on,
    no uncorrectable errors); empty when nothing is."""
    found = []
    if len(gpus) != expected_count:
        found.append(f"{len(gpus)} GPUs visible, the VM size has {expected_count}")
    for gpu in gpus:
        if gpu.ecc_mode != "Enabled":
            found.append(f"GPU {gpu.index} ({gpu.bus_id}): ECC is {gpu.ecc_mode}, expected Enabled")
        if gpu.uncorrected_errors:
            found.append(
                f"GPU {gpu.index} ({gpu.bus_id}): {gpu.uncorrected_errors} uncorrectable ECC "
                "errors since the driver loaded"
            )
    return found
