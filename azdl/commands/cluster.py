"""`azdl cluster check -s STACK --nodes N`: the pre-flight health gate as a job of its own, on N
nodes of the stack's cluster: GPU count and ECC on every node, each node's NCCL all-reduce, and
the all-reduce across the nodes, judged against the VM size's published baseline. The verdict
lines (`azdl-health: …`) are printed from the job's logs; the figures are in its `health`
output (`azdl jobs download JOB --output health`)."""

import contextlib
import sys

from azdl.commands.options import add_job_name_option, add_stack_options, positive_int
from azdl.console import print_json
from azdl.errors import AzdlError

JSON_SCHEMA = "azdl.cluster-check-result/v1"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster",
        help="check the cluster's nodes: the pre-flight health gate as a job",
        description="Checks of the stack's cluster that run as jobs on its nodes.",
    )
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    q = sub.add_parser(
        "check",
        help="GPUs and NCCL all-reduce bandwidth of N nodes against the size's baseline",
        description=__doc__,
    )
    add_stack_options(q)
    q.add_argument("--nodes", type=positive_int, default=1, help="nodes to check (default 1)")
    q.add_argument("--experiment", default="azdl", help="Azure ML experiment (default azdl)")
    add_job_name_option(q, "azdl-check-<nodes>n-<time>-<hex>")
    q.add_argument("--dry-run", action="store_true", help="print the job as YAML; send nothing")
    q.add_argument(
        "--json",
        action="store_true",
        help=f"print the job's name, studio URL, status and verdict lines as one JSON document "
        f"({JSON_SCHEMA}; the logs go to stderr); stable for scripts",
    )
    q.set_defaults(func=check)


def check(args) -> int:
    from azdl.jobs import health
    from azdl.jobs.stack_outputs import load_outputs
    from azdl.jobs.submit import new_run_id, send

    if args.json and args.dry_run:
        raise AzdlError("--json reports the check's result; --dry-run prints its job's YAML")
    outputs = load_outputs(args.stack, args.outputs)
    run_id = args.name or new_run_id(f"check-{args.nodes}n")
    job = health.build_check_job(outputs, args.nodes, run_id, args.experiment)
    # With --json, what the check says as it goes (levels, submission, logs) is on stderr.
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        print(f"# {health.levels_text(outputs.vm_size.name, across_nodes=True)}")
        code = send(outputs, job, dry_run=args.dry_run, wait=not args.dry_run)
    if args.dry_run:
        return code
    if args.json:
        from azdl.jobs.workspace import ml_client

        ended = ml_client(outputs).jobs.get(run_id)
        print_json(JSON_SCHEMA, {
            "name": run_id, "url": ended.studio_url, "status": ended.status,
            "verdicts": health.verdict_lines(outputs, run_id),
        })  # fmt: skip
        return code
    print(health.verdicts(outputs, run_id), file=sys.stderr)
    return code
