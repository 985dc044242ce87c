"""`azdl estimate`: the cheapest cluster that trains a workload by a deadline (or the fastest
within a budget, or the whole time/cost frontier), from measured scaling and the stack's prices.
Offline: no Azure access; the stack, when given, is rendered as `azdl plan` renders it."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from azdl.commands.options import completes_stacks
from azdl.console import make_console, print_json, print_table
from azdl.errors import AzdlError
from azdl.estimate import frontier, report
from azdl.estimate.throughput import (
    DEFAULT_OVERLAP,
    Inputs,
    bus_bandwidth,
    read_bench,
    read_gpu_kit,
    read_project_gpu_kit,
    read_published,
)
from azdl.estimate.workload import DEFAULT_EPOCHS, MODELS, Workload, parse_duration
from azdl.review.prices import PRICES_ENV, load_prices, regions
from infra.catalogue import VM_SIZES, UnknownVmSize, VmSize, get_vm_size
from training.data.imagenet import IMAGENET_TRAIN_IMAGES

if TYPE_CHECKING:
    from rich.console import Console

JSON_SCHEMA = "azdl.estimate-result/v1"
DEFAULT_MAX_NODES = 4  # without a stack: the prod stack's cluster.maxNodes
MORE_NODES_LIMIT = 64  # how far past maxNodes the "needs a larger maxNodes" hint looks


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "estimate",
        help="the cheapest cluster that trains by a deadline: sizes, nodes, priority, hours, USD",
        description="Estimate, for a workload and a deadline and/or budget, the time and cost "
        "of every VM size, node count and priority the stack allows, and recommend one: the "
        "cheapest that meets the deadline, or the fastest within the budget (with neither, the "
        "time/cost frontier). Throughput comes from `azdl bench` results, else a measured "
        "per-GPU rate with a ring all-reduce model, else published rates, or from "
        "--per-gpu-rate/--efficiency; every figure's source is printed beside it. Offline.",
    )
    where = p.add_argument_group("cluster")
    completes_stacks(where.add_argument(
        "-s", "--stack", help="stack whose size, region, maxNodes, spend limit and fixed costs "
        "apply (stacks/Pulumi.STACK.yaml)",
    ))  # fmt: skip
    where.add_argument("--vm-size", action="append", metavar="SIZE",
                       help="a VM size to consider (repeatable; default: the stack's, or every "
                       "GPU size the region's price table lists)")  # fmt: skip
    where.add_argument(
        "--all-sizes",
        action="store_true",
        help="with -s: every GPU size of the region, not only the stack's",
    )
    where.add_argument("--region", help="region without a stack (default: the price file's "
                       "defaultRegion)")  # fmt: skip
    where.add_argument("--max-nodes", type=int, metavar="N", help="node counts 1..N (default: "
                       f"the stack's cluster.maxNodes, else {DEFAULT_MAX_NODES})")  # fmt: skip
    work = p.add_argument_group("workload")
    work.add_argument("--model", choices=sorted(MODELS), default="resnet50")
    work.add_argument(
        "--images",
        type=int,
        default=IMAGENET_TRAIN_IMAGES,
        help=f"images per epoch (default ImageNet-1k train, {IMAGENET_TRAIN_IMAGES:,})",
    )
    work.add_argument("--epochs", type=float, default=DEFAULT_EPOCHS,
                      help=f"epochs (default {DEFAULT_EPOCHS})")  # fmt: skip
    target = p.add_argument_group("target (neither: the time/cost frontier)")
    target.add_argument("--deadline", metavar="DURATION", help="e.g. 90m, 12h, 2d")
    target.add_argument("--budget", type=float, metavar="USD", help="most to spend, in USD")
    rate = p.add_argument_group("throughput")
    rate.add_argument(
        "--bench",
        type=Path,
        action="append",
        metavar="FILE",
        help="results.json of an `azdl bench` on a cluster (repeatable)",
    )
    rate.add_argument("--gpu-results", type=Path, metavar="FILE",
                      help="the GPU kit's p3_gpu.json (default: the project's "
                      "benchmarks/results/p3_gpu.json when it exists)")  # fmt: skip
    rate.add_argument(
        "--per-gpu-rate",
        type=float,
        metavar="R",
        help="images/s per GPU, replacing measured and published rates",
    )
    rate.add_argument("--efficiency", type=float, metavar="E",
                      help="fraction of linear scaling at every node count above 1 (0-1], "
                      "replacing the communication model")  # fmt: skip
    rate.add_argument("--overlap", type=float, default=DEFAULT_OVERLAP,
                      help="fraction of the all-reduce hidden behind the backward pass "
                      f"(default {DEFAULT_OVERLAP}, an assumption)")  # fmt: skip
    rate.add_argument("--batch-per-gpu", type=int, metavar="B",
                      help="images per GPU per step for the model (default: the rate's own, "
                      "else 256)")  # fmt: skip
    low = p.add_argument_group("low-priority nodes")
    low.add_argument(
        "--eviction-rate",
        type=float,
        default=frontier.DEFAULT_EVICTION_RATE,
        help="evictions per node-hour (default "
        f"{frontier.DEFAULT_EVICTION_RATE}, an assumption: Azure publishes none)",
    )
    low.add_argument("--checkpoint-minutes", type=float,
                     help="the job's checkpoint interval (default: one epoch, as the jobs "
                     "checkpoint every epoch)")  # fmt: skip
    low.add_argument("--restart-minutes", type=float, default=frontier.DEFAULT_RESTART_MINUTES,
                     help="time to resume after an eviction (default "
                     f"{frontier.DEFAULT_RESTART_MINUTES:g}, an assumption)")  # fmt: skip
    out = p.add_argument_group("output")
    out.add_argument("--prices", type=Path, metavar="FILE",
                     help=f"price file (default: ${PRICES_ENV}, else the shipped one), as "
                     "`azdl plan --prices`")  # fmt: skip
    out.add_argument("--plot", type=Path, metavar="FILE", help="write cost against time as PNG")
    out.add_argument(
        "--json",
        action="store_true",
        help=f"print the estimate as one JSON document ({JSON_SCHEMA}) only; stable for scripts",
    )
    out.add_argument("--all", action="store_true", help="list every option, not only the frontier")
    out.add_argument(
        "--quota",
        action="store_true",
        help="read the deployed stack's free vCPU quota for each size and priority (needs -s "
        "STACK deployed and an Azure sign-in; azure-ai-ml's usage calls, as `azdl submit` reads "
        "them)",
    )
    p.set_defaults(func=run)


def _above_zero(v):
    return v > 0


def _at_least_zero(v):
    return v >= 0


def _check_numbers(args: argparse.Namespace) -> None:
    """Every number given must be in range: one line naming the option and what it takes."""
    checks = (
        ("--budget", args.budget, _above_zero, "a number of USD above 0"),
        ("--max-nodes", args.max_nodes, lambda v: v >= 1, "a whole number of at least 1"),
        ("--images", args.images, lambda v: v >= 1, "at least 1"),
        ("--epochs", args.epochs, _above_zero, "a number above 0"),
        ("--per-gpu-rate", args.per_gpu_rate, _above_zero, "images/s above 0"),
        ("--efficiency", args.efficiency, lambda v: 0 < v <= 1, "a fraction above 0, at most 1"),
        ("--overlap", args.overlap, lambda v: 0 <= v <= 1, "a fraction from 0 to 1"),
        ("--batch-per-gpu", args.batch_per_gpu, lambda v: v >= 1, "at least 1"),
        ("--eviction-rate", args.eviction_rate, _at_least_zero, "evictions per node-hour, >= 0"),
        ("--checkpoint-minutes", args.checkpoint_minutes, _above_zero, "minutes above 0"),
        ("--restart-minutes", args.restart_minutes, _at_least_zero, "minutes, 0 or more"),
    )
    for option, value, ok, allowed in checks:
        if value is not None and not ok(value):
            raise AzdlError(f"{option} {value:g}: expected {allowed}")


def _size(name: str, prices) -> VmSize:
    try:
        size = get_vm_size(name)
    except UnknownVmSize as exc:
        raise AzdlError(f"--vm-size: {exc}") from None
    if not size.gpus:
        raise AzdlError(f"--vm-size {name}: a CPU size (no GPUs); estimate takes GPU sizes")
    if not prices.offers(name):
        offered = ", ".join(s for s in sorted(VM_SIZES) if prices.offers(s) and VM_SIZES[s].gpus)
        raise AzdlError(
            f"--vm-size {name} is not offered in {prices.region} according to the price table "
            f"({prices.file}); GPU sizes there: {offered or 'none'}"
        )
    return size


def _fixed_cost(stack: str, config, prices, console: Console) -> tuple[float, str]:
    """The stack's own cost per hour, whether it trains or not, as `azdl plan` prices it: its
    idle floor per month (clusters at min nodes, NAT, endpoints, share, ...) / hours per month,
    the training cluster left out; and a sentence saying so."""
    from azdl.review import cost
    from azdl.review.plan import render_stack

    with console.status(f"rendering stack {stack} offline for its fixed costs"):
        doc, _ = render_stack(stack, reuse=True)
    est = cost.estimate(doc, prices)
    training = f"cluster {config.cluster.name}"
    lines = [x for x in est.lines if x.item != training]
    fixed = sum(x.idle_per_month or 0.0 for x in lines) / prices.hours_per_month
    unpriced = sum(1 for x in lines if x.idle_per_month is None)
    what = (
        f"stack {stack}'s fixed cost {fixed:.2f} USD/h (its idle floor per month / "
        f"{prices.hours_per_month:g} h, as `azdl plan` prices it, training cluster left out)"
    )
    if unpriced:
        what += f"; {unpriced} item(s) unpriced, so a lower bound"
    return fixed, what


def read_quotas(stack: str, opts) -> dict[tuple[str, str], int | None]:
    """Free cores per (VM size, priority) of the options, from the stack's workspace
    (azdl.jobs.quota.read_quota: the family's and the regional total's free cores)."""
    from azdl.jobs.quota import read_quota
    from azdl.jobs.stack_outputs import load_outputs
    from azdl.jobs.workspace import ml_client

    outputs = load_outputs(stack)
    client = ml_client(outputs)
    location = outputs.values.get("location")
    tiers = {frontier.DEDICATED: "dedicated", frontier.LOW_PRIORITY: "low_priority"}
    found = {}
    for size, priority in dict.fromkeys((o.vm_size, o.priority) for o in opts):
        quota = read_quota(client, location, size, tiers[priority])
        if quota is None:
            raise AzdlError(
                f"--quota: Azure ML lists no {size} in {location}; its quota is unknown"
            )
        found[size, priority] = quota.free
    return found


def run(args: argparse.Namespace) -> int:
    _check_numbers(args)
    if args.quota and not args.stack:
        raise AzdlError("--quota reads a deployed stack's quota: give -s STACK")
    deadline = parse_duration(args.deadline) if args.deadline is not None else None
    config = None
    if args.stack:  # the stack file is checked here; it is rendered once every input is
        from azdl.review.plan import check_stack_file, stack_file
        from infra.config import load_stack_file

        path = stack_file(args.stack)
        check_stack_file(path)
        config = load_stack_file(path)
        if args.region and args.region != config.location:
            raise AzdlError(f"--region {args.region}: stack {args.stack} is in {config.location}")
    if args.prices is not None:
        regions(args.prices)  # a missing or malformed file fails here
    region = config.location if config else args.region
    prices = load_prices(args.prices, region=region)
    if not prices.known:
        raise AzdlError(
            f"region {prices.region}: the price table {prices.file} has no prices for it; "
            f"regions there: {', '.join(regions(args.prices))}"
        )
    if args.vm_size:
        sizes = [_size(name, prices) for name in dict.fromkeys(args.vm_size)]
    elif config and not args.all_sizes:
        sizes = [_size(config.cluster.vm_size.name, prices)]
    else:
        sizes = [s for s in VM_SIZES.values() if s.gpus and prices.offers(s.name)]
    max_nodes = args.max_nodes or (config.cluster.max_nodes if config else DEFAULT_MAX_NODES)

    inputs = Inputs(
        published=read_published(),
        per_gpu_rate=args.per_gpu_rate,
        efficiency=args.efficiency,
        overlap=args.overlap,
        batch_per_gpu=args.batch_per_gpu,
    )
    for path in args.bench or ():
        read_bench(path, inputs)
    kit_note = None
    if args.gpu_results is not None:
        read_gpu_kit(args.gpu_results, inputs)
    else:  # the project's, where the kit has run; a file it cannot use is said, not fatal
        kit_note = read_project_gpu_kit(inputs)
    fixed, fixed_note = 0.0, "no stack: no fixed cost of a stack included (-s STACK adds it)"
    if config is not None:
        fixed, fixed_note = _fixed_cost(args.stack, config, prices, make_console(stderr=True))

    workload = Workload(MODELS[args.model], args.images, args.epochs)
    settings = frontier.Settings(
        workload=workload,
        prices=prices,
        max_nodes=max_nodes,
        fixed_hourly=fixed,
        max_gpu_spend_per_hour=config.max_gpu_spend_per_hour_usd if config else None,
        eviction_rate=args.eviction_rate,
        restart_minutes=args.restart_minutes,
        checkpoint_hours=args.checkpoint_minutes / 60 if args.checkpoint_minutes else None,
    )
    opts = frontier.options(sizes, settings, inputs)
    quota = read_quotas(args.stack, opts) if args.quota else None
    chosen = frontier.recommend(opts, deadline, args.budget)
    needs: list[str] = []
    if chosen is None and (deadline is not None or args.budget is not None):
        wider = dataclasses.replace(settings, max_nodes=MORE_NODES_LIMIT)
        more = [o for o in frontier.options(sizes, wider, inputs) if o.nodes > max_nodes]
        needs = frontier.nearest(opts, deadline, args.budget, more, max_nodes)
    sources = _sources(workload, prices, fixed_note, sizes, max_nodes, settings, inputs, opts)
    if quota is not None:
        sources[-1] = (
            "quota: cores needed = nodes × vCPUs (infra/vm_sizes.yaml); free cores read from "
            f"stack {args.stack}'s workspace now (family and regional totals, the smaller)"
        )
    if kit_note:
        sources.append(kit_note)
    where = f"stack {args.stack}" if args.stack else f"region {prices.region}"
    title = f"{workload.label}; {where}, 1-{max_nodes} nodes"

    if args.plot:
        report.plot(opts, chosen, deadline, args.budget, title, args.plot)
    if args.json:
        context = {
            "workload": {"model": workload.model.name, "images": workload.images,
                         "epochs": workload.epochs},
            "stack": args.stack, "region": prices.region, "maxNodes": max_nodes,
            "deadlineHours": deadline, "budgetUsd": args.budget, "fixedHourlyUsd": fixed,
        }  # fmt: skip
        document = report.document(opts, chosen, needs, sources, context, quota)
        print_json(JSON_SCHEMA, document)
        return 0 if chosen is not None or (deadline is None and args.budget is None) else 1
    out = make_console()
    heading = f"Time and cost of {title} (USD, estimate)"
    table = report.frontier_table(opts, deadline, args.budget, chosen, heading, args.all, quota)
    print_table(out, table)
    out.print("→ recommendation, * on the time/cost frontier; ≤ an upper bound: low priority "
              "priced as dedicated, for want of a low-priority price", soft_wrap=True)  # fmt: skip
    if chosen is not None:
        out.print(f"[bold]{report.recommendation_line(chosen)}[/]", soft_wrap=True)
        out.print(f"  throughput: {chosen.rate.source}", soft_wrap=True)
        if chosen.price_note:
            out.print(f"  price: {chosen.price_note}", soft_wrap=True)
    elif deadline is not None or args.budget is not None:
        out.print("[bold red]no option meets the target[/]", soft_wrap=True)
        for line in needs:
            out.print(f"  {line}", soft_wrap=True)
    else:
        out.print("no deadline or budget given: the frontier above is the answer "
                  "(--deadline and/or --budget pick one option)", soft_wrap=True)  # fmt: skip
    for line in _exclusions(opts):
        out.print(f"excluded: {line}", soft_wrap=True)
    for line in sources:
        out.print(f"source: {line}", soft_wrap=True)
    if args.plot:
        out.print(f"plot: {args.plot}", soft_wrap=True)
    return 0 if chosen is not None or (deadline is None and args.budget is None) else 1


def _sources(workload, prices, fixed_note, sizes, max_nodes, settings, inputs, opts) -> list[str]:
    lines = [
        f"workload: {workload.label}; gradient {workload.model.gradient_bytes / 1e6:.1f} MB "
        f"(fp32) from {workload.model.parameters:,} parameters: {workload.model.source}",
        f"prices: {prices.label}",
        f"fixed cost: {fixed_note}",
    ]
    for size in sizes:
        for gpus in (size.gpus, size.gpus * 2) if max_nodes > 1 else (size.gpus,):
            found = bus_bandwidth(size, gpus)
            if found:
                lines.append(f"communication ({size.name}): {found[1]}")
    lines.append(
        f"communication model: overlap {inputs.overlap:g} of the all-reduce hidden behind the "
        "backward pass (an assumption; --overlap)"
    )
    if any(o.priority == frontier.LOW_PRIORITY for o in opts):
        interval = (
            f"{settings.checkpoint_hours * 60:g} min" if settings.checkpoint_hours
            else "one epoch (the jobs checkpoint every epoch)"
        )  # fmt: skip
        lines.append(
            f"low priority: {settings.eviction_rate:g} evictions per node-hour (an assumption: "
            "Azure ML documents that low-priority nodes can be preempted at any time but "
            f"publishes no rate), checkpoint interval {interval}, restart "
            f"{settings.restart_minutes:g} min (an assumption)"
        )
    lines.append(
        "quota: cores needed = nodes × vCPUs (infra/vm_sizes.yaml); the subscription's quota "
        f"is {report.QUOTA_NOT_READ} (--quota reads it from a deployed stack)"
    )
    return lines


def _exclusions(opts) -> list[str]:
    """Why options were left out, one line per size and reason, with how many."""
    excluded = Counter(f"{o.vm_size}: {o.excluded}" for o in opts if not o.eligible)
    return [
        f"({count} option{'s' if count > 1 else ''}) {reason}"
        for reason, count in sorted(excluded.items())
    ]
