"""`azdl plan`: render stacks offline (no Azure, no Pulumi CLI) as a manifest, a tree and a
cost estimate."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azdl.commands.options import add_stacks_argument, positive_int, stacks_of
from azdl.console import make_console, print_json
from azdl.review.cost_table import print_cost
from azdl.review.prices import PRICES_ENV
from training.data.imagenet import IMAGENET_TRAIN_IMAGES

if TYPE_CHECKING:
    from azdl.review import cost

JSON_SCHEMA = "azdl.plan-result/v1"
BUDGET_KEY = "maxGpuSpendPerHourUsd"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="render a stack offline: JSON manifest, resource tree, cost estimate",
        description="Run the project's Pulumi program for its stack STACK under the "
        "Pulumi SDK's mocks (no cloud access, no Pulumi CLI) and write a deterministic JSON "
        "manifest (OUT/STACK.json), print the resource tree and an estimated cost.",
    )
    add_stacks_argument(p, "STACK", "stack name(s), e.g. dev prod")
    p.add_argument(
        "--out", type=Path, help="manifest folder (default: out/plan in the project's folder)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help=f"print one JSON document ({JSON_SCHEMA}: per stack its manifest file, resource "
        "count, cost estimate and warnings) instead of the tree and tables; stable for scripts",
    )
    p.add_argument("--no-tree", action="store_true", help="leave out the resource tree")
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--images-per-sec", type=float, help="measured throughput for epoch cost")
    speed.add_argument(
        "--throughput", type=Path, help="job log / JSON lines with an azdl.throughput/v1 record"
    )
    p.add_argument(
        "--workers", type=positive_int, help="GPUs the --images-per-sec figure was measured on"
    )
    p.add_argument(
        "--images-per-epoch", type=positive_int, default=IMAGENET_TRAIN_IMAGES,
        help=f"images in one epoch (default ImageNet-1k train, {IMAGENET_TRAIN_IMAGES})",
    )  # fmt: skip
    p.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help=f"price file in the layout of azdl/review/prices.yaml (default: ${PRICES_ENV}, "
        "else the shipped one); the stack's region picks the block",
    )
    p.set_defaults(func=run)


def gpu_per_hour(est: cost.Estimate) -> float:
    """The clusters' priced lines at their maximum node count: what the GPU budget bounds."""
    return sum(x.max_per_hour or 0.0 for x in est.lines if x.item.startswith("cluster "))


def budget_warnings(doc: dict[str, Any], est: cost.Estimate) -> list[str]:
    """A warning when the clusters at their maximum cost more per hour than the stack's
    `maxGpuSpendPerHourUsd` (the budget the policy pack enforces at `pulumi preview`)."""
    budget = doc["config"].get(f"{doc['project']}:{BUDGET_KEY}")
    spend = gpu_per_hour(est)
    if budget is None or spend <= float(budget):
        return []
    return [
        f"the clusters at their maximum size cost {spend:,.2f} USD/h, above the stack's "
        f"{BUDGET_KEY} of {float(budget):,.2f}: lower cluster.maxNodes or the VM size, or raise "
        "the budget (`azdl policy` fails on this too)"
    ]


def access_warnings(doc: dict[str, Any]) -> list[str]:
    """What keeps anyone from using the rendered stack (infra/way_in.py): a private stack with
    no operators, or no way into its network."""
    from infra.config import load_config
    from infra.way_in import missing_ways_in

    config = load_config(doc["config"], stack=doc["stack"])
    return missing_ways_in(config)


def cost_json(est: cost.Estimate) -> dict[str, Any]:
    return {
        "currency": "USD",
        "max_per_hour": est.max_per_hour,
        "idle_per_month": est.idle_per_month,
        "gpu_per_hour": gpu_per_hour(est),
        "complete": est.unpriced_lines == 0,
        "lines": [asdict(line) for line in est.lines],
        "unpriced": est.unpriced,
        "notes": est.notes,
        "epoch": est.epoch,
    }


def shown(path: Path) -> Path:
    """`path` as the user would type it here: relative to the current folder when inside it."""
    here = Path.cwd()
    return path.relative_to(here) if path.is_relative_to(here) else path


def run(args: argparse.Namespace) -> int:
    from azdl import project, pulumi_cli
    from azdl.review import cost, manifest
    from azdl.review.plan import check_stack_file, render_stack, stack_file
    from azdl.review.prices import load_prices
    from azdl.review.tree import render_tree

    cli = pulumi_cli.check()  # the CLI that will deploy the plan, where there is one
    if cli:
        print(cli, file=sys.stderr)
    stacks = stacks_of(args, "STACK")
    for stack in stacks:  # every stack file checked before anything is rendered or written
        check_stack_file(stack_file(stack))
    if args.prices is not None:
        load_prices(args.prices)  # a missing or malformed file fails before any rendering
    console = make_console()
    throughput = cost.throughput_from(args.throughput) if args.throughput else None
    results = []
    out = args.out or shown(project.out_dir() / "plan")
    for stack in stacks:
        doc, seconds = render_stack(stack)
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{stack}.json"
        target.write_text(manifest.dumps(doc))
        prices = load_prices(args.prices, region=cost.region_of(doc))
        est = cost.estimate(doc, prices)
        if throughput:
            cost.add_epoch_cost(
                est, doc, float(throughput["images_per_sec"]), int(throughput["workers"]),
                args.images_per_epoch, prices,
            )  # fmt: skip
        elif args.images_per_sec is not None:
            cost.add_epoch_cost(
                est, doc, args.images_per_sec, args.workers, args.images_per_epoch, prices
            )
        warnings = budget_warnings(doc, est) + access_warnings(doc)
        for warning in warnings:  # on stderr in both modes: stdout stays the tree or the JSON
            print(f"warning: stack {stack}: {warning}", file=sys.stderr)
        if args.json:
            results.append(
                {
                    "stack": stack,
                    "manifest": str(target),
                    "resources": sum(1 for r in doc["resources"] if r.get("custom", True)),
                    "cost": cost_json(est),
                    "warnings": warnings,
                }
            )
            continue
        if not args.no_tree:
            print(render_tree(doc), flush=True)
        print_cost(console, est)
        console.print(f"manifest: {target} (rendered in {seconds:.1f} s)\n", soft_wrap=True)
    if args.json:
        print_json(JSON_SCHEMA, {"stacks": results})
    return 0
