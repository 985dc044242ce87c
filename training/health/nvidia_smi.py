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


# Pending row remaps: nvidia-smi's row-remapper query as Azure's node health check reads it
# (Azure/azurehpc-health-checks customTests/azure_gpu_ecc.nhc at 0e0a1ac: `--query-remapped-rows=
# remapped_rows.pending,remapped_rows.failure,remapped_rows.uncorrectable`; a pending remap or a
# remap failure fails the node, FaultCode NHC2007, as do more than 512 rows remapped for
# uncorrectable errors). With the bus id first, to name the GPU. nvidia-smi writes the pending
# and failure flags as 0/1 or No/Yes depending on the driver; both are read.
REMAP_FIELDS = (
    "gpu_bus_id",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "remapped_rows.uncorrectable",
)
REMAP_COMMAND = ("nvidia-smi", f"--query-remapped-rows={','.join(REMAP_FIELDS)}",
                 "--format=csv,noheader")  # fmt: skip
REMAPPED_UNCORRECTABLE_LIMIT = 512  # azure_gpu_ecc.nhc


@dataclass(frozen=True)
class Remaps:
    bus_id: str
    pending: bool | None  # None: nvidia-smi says [N/A] (a GPU without row remapping)
    failure: bool | None
    uncorrectable: int | None


def _flag(cell: str) -> bool | None:
    value = cell.strip().lower()
    if value in ("0", "no"):
        return False
    if value in ("yes",) or value.isdigit():
        return True
    return None


def parse_remaps(text: str) -> list[Remaps]:
    """One Remaps per CSV line of the row-remapper query's output."""
    found = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(REMAP_FIELDS):
            raise ValueError(
                f"nvidia-smi line {line!r}: expected {len(REMAP_FIELDS)} fields {REMAP_FIELDS}"
            )
        bus_id, pending, failure, uncorrectable = cells
        count = int(uncorrectable) if uncorrectable.isdigit() else None
        found.append(Remaps(bus_id, _flag(pending), _flag(failure), count))
    return found


def remap_problems(remaps: list[Remaps]) -> list[str]:
    """What the row remapper says is wrong (empty when nothing is)."""
    found = []
    for gpu in remaps:
        if gpu.pending:
            found.append(f"GPU {gpu.bus_id}: a row remap is pending (reset the GPU or reboot "
                         "the node before using it)")  # fmt: skip
        if gpu.failure:
            found.append(f"GPU {gpu.bus_id}: a row remap failed (the GPU needs service)")
        if gpu.uncorrectable is not None and gpu.uncorrectable > REMAPPED_UNCORRECTABLE_LIMIT:
            found.append(f"GPU {gpu.bus_id}: {gpu.uncorrectable} rows remapped for uncorrectable "
                         f"errors (more than {REMAPPED_UNCORRECTABLE_LIMIT})")  # fmt: skip
    return found
