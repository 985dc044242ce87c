"""The NCCL baseline table (infra/nccl_baselines.yaml) against what Azure publishes: the
single-node floors of Azure's node health checks (recorded in
tests/infra/data/azurehpc_nccl_allreduce_checks.txt with their commit) and the ND H100 v5 SKU
baseline of Azure/ai-infrastructure-on-azure."""

import re
from pathlib import Path

import pytest

from infra.catalogue import VM_SIZES
from infra.nccl_baselines import NCCL_BASELINES, baseline

CHECKS = Path(__file__).parent / "data" / "azurehpc_nccl_allreduce_checks.txt"
UNITS = {"G": 1 << 30}


def nhc_checks() -> dict[str, tuple[float, int]]:
    """VM size (Azure's spelling) -> (threshold GB/s, message bytes)."""
    found = {}
    for line in CHECKS.read_text().splitlines():
        match = re.match(r"(\w+)\.conf:.*check_nccl_allreduce ([\d.]+) \d+ (\d+)([G])", line)
        if match:
            conf, threshold, size, unit = match.groups()
            name = next(n for n in VM_SIZES if n.lower() == f"standard_{conf}")
            found[name] = (float(threshold), int(size) * UNITS[unit])
    return found


def test_every_size_with_a_baseline_is_in_the_catalogue_and_every_nhc_size_has_one():
    assert set(NCCL_BASELINES) <= set(VM_SIZES)
    assert set(nhc_checks()) == set(NCCL_BASELINES)


# Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md (commit 8fd0c6e, 2024-09-27):
# one ND H100 v5's all_reduce_perf busbw at 8 G.
MEASURED = {"Standard_ND96isr_H100_v5": 478.87}


@pytest.mark.parametrize("size", sorted(nhc_checks()))
def test_single_node_levels_and_message_size_are_azures_health_check_floor(size):
    threshold, message_bytes = nhc_checks()[size]
    entry = baseline(size)
    assert entry.message_bytes == message_bytes
    assert entry.single_node.fail_below_gbps == threshold
    # Azure publishes the floor only, except a measured node where one is published.
    assert entry.single_node.expected_gbps == MEASURED.get(size, threshold)
    assert f"check_nccl_allreduce {threshold}" in entry.single_node.source


def test_h100_multi_node_levels_are_the_published_sku_baseline():
    # Azure/ai-infrastructure-on-azure skills/slurm/sku_performance_baseline/SKILL.md (448d474,
    # 2026-03-27): ND96isr_H100_v5 all_reduce busbw ~450 GB/s, Warn < 400, GHR < 300.
    level = baseline("Standard_ND96isr_H100_v5").multi_node
    assert (level.expected_gbps, level.warn_below_gbps, level.fail_below_gbps) == (450, 400, 300)


@pytest.mark.parametrize("size", sorted(NCCL_BASELINES))
def test_levels_are_ordered_and_sourced(size):
    for level in (baseline(size).single_node, baseline(size).multi_node):
        if level is None:
            continue
        fail = level.fail_below_gbps or 0
        warn = level.warn_below_gbps or fail
        assert 0 < fail <= warn <= level.expected_gbps and level.source
