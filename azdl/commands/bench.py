"""`azdl bench`: the synthetic-data job at several sizes, on the cluster or locally, and the
scaling report (azdl.jobs.bench)."""

import argparse
import json
import sys
import time
from pathlib import Path

from azdl import project
from azdl.commands.options import (
    LOCAL_RENAMES,
    add_launcher_option,
    add_script_args,
    add_stack_options,
    script_args,
)
from azdl.console import print_json
from azdl.errors import AzdlError
from azdl.launchers import DEFAULT_LAUNCHER, DEFAULT_TRANSPORT
from training.flavours import DEFAULT_FRAMEWORK, FRAMEWORKS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="measure scaling: the synthetic job at several node counts, as table and plot",
        description="Run the synthetic-data job at several sizes and report images/sec, per "
        "GPU and scaling efficiency as results.json, results.md and scaling.png. On the "
        "stack's cluster by default; --local runs 1 and 2 workers on this machine instead. "
        "Arguments after `--` go to the training script, after the bench's own short settings.",
    )
    add_stack_options(p)
    p.add_argument("--framework", choices=sorted(FRAMEWORKS), default=DEFAULT_FRAMEWORK)
    p.add_argument(
        "--nodes",
        help="comma-separated node counts (default 1,2,4,… up to the cluster's maximum)",
    )
    p.add_argument("--local", action="store_true", help="run local workers instead of jobs")
    add_launcher_option(
        p,
        "how the workers start: horovod (the default; on the cluster under Azure ML's MPI) or "
        "torchrun (on the cluster one torchrun per node)",
        LOCAL_RENAMES,
        transport="with --local and Horovod: gloo (horovodrun --gloo, the default) or mpi "
        "(plain mpirun)",
    )
    p.add_argument("--workers", default="1,2", help="with --local: worker counts (default 1,2)")
    p.add_argument("--out", type=Path, help="report folder (default runs/bench-<time>)")
    p.add_argument(
        "--poll-seconds", type=float, default=30.0, help="job status poll interval (default 30)"
    )
    p.add_argument(
        "--timeout-minutes",
        type=positive_minutes,
        default=120.0,
        help="longest wait for one job, queueing included (default 120); a job still running "
        "then is cancelled and reported as an error, and the next size starts",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report's results.json (azdl.bench/v1) instead of its table; stable for "
        "scripts (the files are written as without it)",
    )
    add_script_args(p)
    p.set_defaults(func=run)


def positive_minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of minutes above 0")
    return value


def counts(text: str, option: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise AzdlError(f"{option} {text!r}: expected comma-separated whole numbers") from None
    if not values or values[0] < 1:
        raise AzdlError(f"{option} {text!r}: expected counts of at least 1")
    return values


def run(args: argparse.Namespace) -> int:
    """Every input is checked (and, on the cluster, the sign-in) before the report folder is
    made."""
    workers = counts(args.workers, "--workers") if args.local else None
    asked = counts(args.nodes, "--nodes") if args.nodes and not args.local else None
    from azdl.jobs import bench  # the sweep's machinery, once the counts are known good
    from azdl.jobs.stack_outputs import load_outputs

    out = args.out or project.runs_dir() / time.strftime("bench-%Y%m%d-%H%M%S", time.gmtime())
    launcher = args.launcher or DEFAULT_LAUNCHER
    if args.transport is not None and (launcher == "torchrun" or not args.local):
        raise AzdlError(
            f"--transport {args.transport} is Horovod's on this machine: it goes with --local "
            "and --launcher horovod"
        )
    if args.local:
        how = (launcher, args.transport or DEFAULT_TRANSPORT)
        bench.check_local(args.framework, workers, script_args(args), *how)
        out.mkdir(parents=True, exist_ok=True)
        runs = bench.run_local(args.framework, workers, script_args(args), out, *how)
    else:
        outputs = load_outputs(args.stack, args.outputs)
        nodes = asked or bench.default_nodes(outputs.max_nodes)
        requests = bench.cluster_requests(
            outputs, args.framework, nodes, script_args(args), launcher
        )
        runs = bench.run_cluster(outputs, requests, out, args.poll_seconds, args.timeout_minutes)
    if args.json:
        document = json.loads((out / "results.json").read_text())
        print_json(document.pop("schema"), document)
    else:
        print((out / "results.md").read_text(), end="")
    wrote = f"wrote {out / 'results.json'}, {out / 'results.md'} and {out / 'scaling.png'}"
    print(wrote if args.json else f"\n{wrote}", file=sys.stderr if args.json else sys.stdout)
    return 0 if all(r.measured for r in runs) else 1
