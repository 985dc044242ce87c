"""GPU spend: the clusters at max nodes within the stack's hourly budget, and known before
deployment so that they can be counted."""

from typing import Any

import pulumi.runtime
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from azdl.review.prices import load_prices
from infra.azure_facts import ML_COMPUTE, UNKNOWN, lookup
from infra.catalogue import VM_SIZES

from .pack import stack_policy


def gpu_spend_per_hour(resources: list[Any]) -> tuple[float, list[str], list[str], list[str]]:
    """(USD/hour of every GPU cluster at max nodes, lines of how, sizes without a price,
    clusters whose size or node count is known only after deployment, left out of the sum)."""
    total, lines, unpriced, unknown = 0.0, [], [], []
    for res in resources:
        if res.resource_type != ML_COMPUTE:
            continue
        node = lookup(res.props, "properties", "properties", default={})
        if node is UNKNOWN:
            unknown.append(f"{res.name} (properties)")
            continue
        size, max_nodes = lookup(node, "vmSize"), lookup(node, "scaleSettings", "maxNodeCount")
        missing = [k for k, v in (("vmSize", size), ("maxNodeCount", max_nodes)) if v is UNKNOWN]
        if missing:
            unknown.append(f"{res.name} ({', '.join(missing)})")
            continue
        if not isinstance(size, str) or not isinstance(max_nodes, int | float):
            continue
        catalogue = VM_SIZES.get(size)
        if catalogue is not None and catalogue.gpus == 0:
            continue  # a CPU cluster (image builds): not GPU spend
        location = lookup(res.props, "location")  # prices are per region (prices.yaml)
        price = load_prices(region=location if isinstance(location, str) else None).vm(size)
        if price is None or catalogue is None:
            unpriced.append(size)
            continue
        total += price * max_nodes
        lines.append(f"{res.name}: {int(max_nodes)} x {size} at {price:.2f} USD/h")
    return total, lines, unpriced, unknown


@stack_policy(
    name="gpu-spend-within-budget",
    description="The GPU clusters at max nodes cost no more per hour than the budget.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "lower cluster.maxNodes or cluster.vmSize, or raise azdl:maxGpuSpendPerHourUsd after "
        "approval"
    ),
    config_schema=PolicyConfigSchema(
        properties={"maxGpuSpendPerHourUsd": {"type": "number", "exclusiveMinimum": 0}}
    ),
)
def _gpu_budget(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    budget = args.get_config().get("maxGpuSpendPerHourUsd")
    if budget is None:  # the stack's own setting, where the engine hands the pack its config
        budget = pulumi.runtime.get_config("azdl:maxGpuSpendPerHourUsd")
    if budget is None:
        report_violation(
            "no GPU budget given: set the policy config maxGpuSpendPerHourUsd "
            "(`azdl policy --pack-config STACK` writes it from the stack)",
            None,
        )
        return
    total, lines, unpriced, _unknown = gpu_spend_per_hour(args.resources)
    for size in unpriced:
        report_violation(
            f"{load_prices().no_vm_price(size)}, so the GPU spend cannot be checked against "
            "the budget: add its price to azdl/review/prices.yaml",
            None,
        )
    if total > float(budget):
        report_violation(
            f"maximum GPU spend {total:.2f} USD/h exceeds the budget {float(budget):.2f} USD/h "
            f"({'; '.join(lines)}; {load_prices().label})",
            None,
        )


@stack_policy(
    name="gpu-spend-known",
    description=(
        "Every GPU cluster's VM size and max nodes are known before deployment, so "
        "gpu-spend-within-budget can count them."
    ),
    enforcement=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    remediation=(
        "set the cluster's vmSize and scaleSettings.maxNodeCount from stack config, not from "
        "another resource's outputs"
    ),
)
def _gpu_spend_known(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    for cluster in gpu_spend_per_hour(args.resources)[3]:
        report_violation(
            f"compute {cluster}: not known until deploy, so this cluster is left out of the "
            "GPU budget check",
            None,
        )
