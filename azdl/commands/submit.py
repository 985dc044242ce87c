"""`azdl submit`: one Horovod training job on the stack's Azure ML cluster.

Reads the stack outputs (`pulumi stack output --json`, or a saved copy with --outputs), checks
everything it can locally, then submits with azure-ai-ml. `--dry-run` prints the job in
azure-ai-ml's REST form, built locally, and never contacts Azure; `--wait` streams the job's logs
until it ends.
"""

import argparse
import re
import secrets
import sys
import time

import yaml

from azdl.commands.options import (
    add_job_name_option,
    add_script_args,
    add_stack_options,
    script_args,
)
from azdl.commands.train import FRAMEWORK_MODULES
from azdl.jobs.spec import DEFAULT_LOCAL_DIR, STORAGE_MODES, JobRequest, build_job
from azdl.jobs.stack_outputs import load_outputs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit a Horovod training job to the stack's GPU cluster",
        description="Submit one Horovod job to the stack's Azure ML cluster: MPI with one "
        "process per GPU, --nodes instances, the stack's environment for the framework's image. "
        "Arguments after `--` go to the training script (see `azdl train --framework keras -- "
        "--help`). Authentication: azure-identity (az login, managed identity).",
    )
    add_stack_options(p)
    p.add_argument("--framework", choices=sorted(FRAMEWORK_MODULES), default="keras")
    p.add_argument("--nodes", type=int, default=1, help="cluster nodes (default 1)")
    p.add_argument(
        "--storage",
        choices=STORAGE_MODES,
        default="mount",
        help="where the shards come from: mount (the data container, read-only blob mount; "
        "default), nfs (the stack's NFS share), copy (blob mount, then each node copies its "
        "shards to local disk), synthetic (no data)",
    )
    p.add_argument("--data-path", default="", help="folder of the shards in the container or share")
    p.add_argument(
        "--local-dir",
        default=DEFAULT_LOCAL_DIR,
        help=f"node-local folder for --storage copy (default {DEFAULT_LOCAL_DIR})",
    )
    p.add_argument("--experiment", default="azdl", help="Azure ML experiment (default azdl)")
    add_job_name_option(p, "azdl-<framework>-<nodes>n-<time>-<hex>")
    p.add_argument(
        "--shm-size",
        type=shm_size,
        default="16g",
        help="shared memory per node: a number above 0 and b, k, m or g (default 16g)",
    )
    p.add_argument(
        "--nccl-debug",
        choices=["VERSION", "WARN", "INFO", "TRACE"],
        default="WARN",
        help="NCCL_DEBUG on GPU sizes (default WARN; INFO shows which transport NCCL picked)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the job as built locally (azure-ai-ml's REST form); do not contact Azure",
    )
    p.add_argument("--wait", action="store_true", help="stream the job's logs until it ends")
    add_script_args(p)
    p.set_defaults(func=run)


def shm_size(text: str) -> str:
    """Docker's shared-memory size as Azure ML takes it: <number><unit>, unit b, k, m or g."""
    if not re.fullmatch(r"[1-9][0-9]*[bkmg]", text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a number above 0 followed by b, k, m or g (e.g. 16g, 512m)"
        )
    return text


def new_run_id(what: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"azdl-{what}-{stamp}-{secrets.token_hex(2)}"


def rest_payload(job) -> dict:
    """`job` in azure-ai-ml's REST form, built locally (what --dry-run shows). Not byte for byte
    the request: azure-ai-ml has no public way to render that, so this uses its private
    conversion, and create_or_update still resolves references before sending (computeId is the
    cluster's name here, its ARM id in the request)."""
    return job._to_job()._to_rest_object().as_dict()


def run(args: argparse.Namespace) -> int:
    outputs = load_outputs(args.stack, args.outputs)
    request = JobRequest(
        framework=args.framework,
        nodes=args.nodes,
        storage=args.storage,
        run_id=args.name or new_run_id(f"{args.framework}-{args.nodes}n"),
        training_args=script_args(args),
        data_path=args.data_path.strip("/"),
        experiment=args.experiment,
        shm_size=args.shm_size,
        local_dir=args.local_dir,
        nccl_debug=args.nccl_debug,
    )
    job = build_job(outputs, request)
    return send(outputs, job, dry_run=args.dry_run, wait=args.wait)


def send(outputs, job, *, dry_run: bool, wait: bool) -> int:
    """Print the job (dry run) or submit it, then optionally stream its logs until it ends."""
    if dry_run:
        print(
            f"# azdl --dry-run: the job for {outputs.source} in azure-ai-ml's REST form, "
            "built locally; submitting resolves computeId (the cluster's name here) to its ARM id"
        )
        print(yaml.safe_dump(rest_payload(job), sort_keys=False), end="")
        return 0

    from azdl.jobs.workspace import ml_client

    client = ml_client(outputs)
    created = client.jobs.create_or_update(job)
    print(f"submitted {created.name}: {created.studio_url}")
    if not wait:
        return 0
    from azure.ai.ml.exceptions import JobException

    try:
        client.jobs.stream(created.name)
    except JobException as exc:  # raised for a job that failed; its status says so below
        print(exc, file=sys.stderr)
    status = client.jobs.get(created.name).status
    print(f"{created.name}: {status}", file=sys.stderr)
    return 0 if status == "Completed" else 1
