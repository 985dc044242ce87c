"""`azdl submit`: one training job on the stack's Azure ML cluster, Horovod's (MPI) or, with
--launcher torchrun, torch.distributed's; a built-in script (--framework) or the user's own
(--script); --dry-run and --export print or write its YAML without contacting Azure
(docs/architecture.md, "Jobs and the CLI")."""

import argparse
import re
import sys
from dataclasses import replace
from pathlib import Path

from azdl.commands.options import (
    CLUSTER_RENAMES,
    add_job_name_option,
    add_launcher_option,
    add_script_args,
    add_stack_options,
    non_negative_int,
    positive_int,
    script_args,
)
from azdl.errors import AzdlError
from azdl.jobs import own_environment
from azdl.jobs import script as own_script
from azdl.jobs.budget import DEFAULT_TIMEOUT_S
from azdl.jobs.request import DEFAULT_LOCAL_DIR, STORAGE_MODES, JobRequest, OwnScript
from azdl.jobs.safeguards import (
    CLUSTER_PROGRESS_TIMEOUT_S,
    CLUSTER_STALL_TIMEOUT_S,
    LEFT_OUT,
    SCRIPT_SETS_ITS_TIMEOUT,
)
from azdl.jobs.submit import JSON_SCHEMA
from azdl.launchers import DEFAULT_LAUNCHER
from training.flavours import DEFAULT_FRAMEWORK, FRAMEWORKS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit a training job (Horovod or torchrun) to the stack's GPU cluster",
        description="Submit one training job to the stack's Azure ML cluster: Horovod under MPI "
        "with one process per GPU (the default) or, with --launcher torchrun, one torchrun per "
        "node (distribution: pytorch); --nodes instances, the stack's environment for the "
        "framework's image. "
        "Arguments after `--` go to the training script (see `azdl train --framework keras -- "
        "--help`), or to your own with --script (docs/own-code.md). Authentication: "
        "azure-identity (az login, managed identity).",
    )
    add_stack_options(p)
    p.add_argument(
        "--framework",
        choices=sorted(FRAMEWORKS),
        help="built-in training script (default keras); with --script: the image it needs "
        "(torch: PyTorch; keras or tf: TensorFlow), found from its imports when left out",
    )
    own = p.add_argument_group("your own script")
    own.add_argument(
        "--script",
        type=Path,
        metavar="FILE",
        help="run `python FILE ARGS` in every process instead of a built-in script; the code "
        "folder is uploaded as the job's code (honouring its .amlignore or .gitignore)",
    )
    own.add_argument(
        "--code",
        type=Path,
        metavar="DIR",
        help="folder to upload with --script (default: the script's folder)",
    )
    own.add_argument(
        "--requirements",
        type=Path,
        metavar="FILE",
        help="pip requirements file in the code folder, installed once per node before training",
    )
    own.add_argument(
        "--wheels",
        type=Path,
        metavar="DIR",
        help="folder of wheels in the code folder: install --requirements from it only "
        "(pip --no-index; for private package registries and clusters without internet)",
    )
    p.add_argument("--nodes", type=positive_int, default=1, help="cluster nodes (default 1)")
    p.add_argument(
        "--environment",
        type=environment_reference,
        metavar="NAME@VERSION",
        help="run on this Azure ML environment of the workspace instead of azdl's image; it "
        "needs the azdl runtime of this release (pip install --no-deps azdl==VERSION), which "
        'the job checks first; no health gate (docs/jobs.md, "Your own environment")',
    )
    add_launcher_option(
        p,
        "horovod: Horovod, Azure ML's MPI with one process per GPU (default); torchrun: "
        "torch.distributed, one torchrun per node starting one worker per GPU "
        "(--framework torch, or your own --script; docs/torchrun.md); with --script the "
        "default is the one the script is written for, read from its source",
        CLUSTER_RENAMES,
    )
    p.add_argument(
        "--max-restarts",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="with --launcher torchrun: restart every worker after a failed one, at most N "
        "times, within the job; a built-in script resumes from its last checkpoint (default 0)",
    )
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
    p.add_argument(
        "--resume-from",
        metavar="JOB",
        help="use the checkpoints folder of an earlier job of the experiment: the training "
        "script resumes from its newest checkpoint and keeps writing there",
    )
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
    add_safeguard_options(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the job as Azure ML CLI v2 YAML, built locally; do not contact Azure",
    )
    p.add_argument(
        "--export",
        type=Path,
        metavar="FILE",
        help="write the job as Azure ML CLI v2 YAML (for `az ml job create -f FILE`, the "
        "studio or pipelines) and stop: nothing is submitted",
    )
    p.add_argument("--wait", action="store_true", help="stream the job's logs until it ends")
    p.add_argument(
        "--json",
        action="store_true",
        help=f"print the job's name, studio URL and status as one JSON document ({JSON_SCHEMA}; "
        "with --wait, once it has ended) instead of text; stable for scripts",
    )
    add_script_args(p)
    p.set_defaults(func=run)


def add_safeguard_options(p: argparse.ArgumentParser) -> None:
    """The options that guard a job's GPU hours (docs/jobs.md, "When a job goes wrong")."""
    p.add_argument(
        "--health-check",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the pre-flight health gate on the job's nodes before training (GPU count and "
        "ECC, NCCL all-reduce bandwidth against the size's published baseline); default: on "
        "for multi-node jobs on InfiniBand sizes",
    )
    p.add_argument(
        "--max-retries",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="follow the job and resubmit it from its last checkpoint, at most N times, when it "
        "fails for a transient reason (pre-empted or failed node, NCCL/InfiniBand error, failed "
        "health gate); not when the script itself fails (default 0: no retry)",
    )
    p.add_argument(
        "--stall-timeout",
        type=positive_int,
        metavar="SECONDS",
        help="end the job when some ranks have waited this long for others in a collective, "
        f"naming the missing ranks and their host (default {CLUSTER_STALL_TIMEOUT_S}; under "
        "torchrun the built-in script's collective timeout, a script of yours sets its own)",
    )
    p.add_argument(
        "--timeout",
        type=positive_int,
        metavar="SECONDS",
        help="Azure ML's limit on the job's run time: it is cancelled after this (default: what "
        f"--max-cost buys, else {DEFAULT_TIMEOUT_S // 3600} hours)",
    )
    p.add_argument(
        "--max-cost",
        type=usd,
        metavar="USD",
        help="a budget for the job: its time limit becomes what this buys on its nodes at the "
        "price table's dedicated price (the table azdl plan and estimate use); retries share it",
    )
    p.add_argument(
        "--progress-timeout",
        type=positive_int,
        metavar="SECONDS",
        help="end the job (retryably, stacks dumped) when training makes no step for this long "
        f"(default {CLUSTER_PROGRESS_TIMEOUT_S} for the built-in scripts; with --script, only "
        "when given, and the script calls training.heartbeat.beat)",
    )
    p.add_argument(
        "--no-safeguards",
        dest="safeguards",
        action="store_false",
        help="with --environment, on an environment without the azdl runtime: run each rank "
        "without azdl's guard (says what is lost; Horovod jobs with mount, nfs or synthetic data)",
    )
    p.add_argument(
        "--no-infiniband-check",
        dest="infiniband_check",
        action="store_false",
        help="on InfiniBand sizes, skip checking that NCCL uses InfiniBand with GPUDirect RDMA",
    )


def usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected an amount in USD above 0")
    return value


def environment_reference(text: str) -> str:
    try:
        return own_environment.parse(text)
    except AzdlError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--environment ")) from None


def shm_size(text: str) -> str:
    """Docker's shared-memory size as Azure ML takes it: <number><unit>, unit b, k, m or g."""
    if not re.fullmatch(r"[1-9][0-9]*[bkmg]", text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a number above 0 followed by b, k, m or g (e.g. 16g, 512m)"
        )
    return text


def own_script_of(args: argparse.Namespace) -> OwnScript | None:
    """The --script options as an OwnScript (absolute paths), or None for a built-in job."""
    if args.script is None:
        for option in ("code", "requirements", "wheels"):
            if getattr(args, option) is not None:
                raise AzdlError(f"--{option} goes with --script")
        return None
    path = own_script.check_script(args.script)
    code_dir = (args.code or path.parent).expanduser().resolve()

    def absolute(option: Path | None) -> Path | None:
        return None if option is None else option.expanduser().resolve()

    return OwnScript(path, code_dir, absolute(args.requirements), absolute(args.wheels))


def framework_of(args: argparse.Namespace, script: OwnScript | None) -> str:
    """--framework, else (for a script) the one its imports name, else keras."""
    if args.framework or script is None:
        return args.framework or DEFAULT_FRAMEWORK
    found = own_script.detect_framework(script.path)
    if found is None:
        raise AzdlError(
            f"can't tell from {script.path.name}'s imports whether it needs the PyTorch or the "
            "TensorFlow image; say --framework torch or --framework keras"
        )
    return found


def launcher_of(args: argparse.Namespace, script: OwnScript | None) -> str:
    """--launcher, else horovod; for a script, the one its source asks for (a --launcher it
    contradicts is refused), said in one line when azdl chose it."""
    if script is None:
        return args.launcher or DEFAULT_LAUNCHER
    launcher, how = own_script.launcher_for(script.path, args.launcher, DEFAULT_LAUNCHER)
    if how is not None:
        print(f"azdl: {how}", file=sys.stderr)
    return launcher


def progress_timeout_of(args: argparse.Namespace, script: OwnScript | None) -> int | None:
    """--progress-timeout, else the cluster default for the built-in scripts (they beat) and
    none for a user's script (it may not) or without the guard (--no-safeguards)."""
    if args.progress_timeout is not None or script is not None or not args.safeguards:
        return args.progress_timeout
    return CLUSTER_PROGRESS_TIMEOUT_S


def stall_timeout_of(
    args: argparse.Namespace, script: OwnScript | None, launcher: str
) -> int | None:
    """--stall-timeout, else the cluster default; none for a user's script under torchrun,
    whose process group has the timeout the script gives it."""
    if launcher == "torchrun" and script is not None:
        if args.stall_timeout is not None:
            raise AzdlError(SCRIPT_SETS_ITS_TIMEOUT)
        return None
    return args.stall_timeout or CLUSTER_STALL_TIMEOUT_S


def run(args: argparse.Namespace) -> int:
    if args.json and (args.dry_run or args.export is not None):
        raise AzdlError("--json reports a submitted job; --dry-run and --export print its YAML")
    script = own_script_of(args)
    framework = framework_of(args, script)
    launcher = launcher_of(args, script)
    # The job's machinery (the outputs' model, then azure-ai-ml) once the options are good.
    from azdl.jobs import export, health, node_mtbf
    from azdl.jobs.spec import build_job, time_limit, warnings
    from azdl.jobs.stack_outputs import load_outputs
    from azdl.jobs.submit import ml_client_checked, new_run_id, send, send_with_retries

    outputs = load_outputs(args.stack, args.outputs)
    own_env = args.environment is not None
    if own_env and args.health_check is None and health.wanted(outputs, args.nodes, None, False):
        print(f"azdl: {health.NO_GATE_IN_OWN_ENVIRONMENT}", file=sys.stderr)
    what = script.path.stem if script else framework
    request = JobRequest(
        framework=framework,
        nodes=args.nodes,
        storage=args.storage,
        run_id=args.name or new_run_id(f"{what}-{args.nodes}n"),
        training_args=script_args(args),
        data_path=args.data_path.strip("/"),
        experiment=args.experiment,
        shm_size=args.shm_size,
        local_dir=args.local_dir,
        nccl_debug=args.nccl_debug,
        script=script,
        resume_from=args.resume_from,
        health_check=health.wanted(outputs, args.nodes, args.health_check, own_env),
        stall_timeout=stall_timeout_of(args, script, launcher),
        timeout=args.timeout,
        max_cost=args.max_cost,
        progress_timeout=progress_timeout_of(args, script),
        infiniband_check=args.infiniband_check,
        launcher=launcher,
        max_restarts=args.max_restarts,
        environment=args.environment,
        safeguards=args.safeguards,
    )
    job = build_job(outputs, request)  # validated before anything is read or sent
    if not request.safeguards:
        print(f"azdl: {LEFT_OUT}", file=sys.stderr)
    for warning in warnings(request):
        print(f"warning: {warning}", file=sys.stderr)
    auto = node_mtbf.wanted(request.training_args)
    if args.export is not None:
        path = export.write(job, args.export)
        print(f"wrote {path}: submit it with `az ml job create -f {path}` (or azdl submit)")
        if not args.dry_run:
            if auto:
                print(f"# {node_mtbf.NOT_READ}")
            return 0
    client, mtbf_note = None, None
    if auto:
        if args.dry_run:  # (an --export without it has returned)
            mtbf_note = node_mtbf.NOT_READ
        else:  # the stack's history is the workspace's: sign in now, once
            client = ml_client_checked(outputs, request.nodes)
            found = node_mtbf.for_cluster(client, outputs)
            request = replace(request, node_mtbf_h=found.node_mtbf_h)
            job, mtbf_note = build_job(outputs, request), found.line()
    # What the job is held to, beside it: after the dry run's header, after `submitted`.
    notes = [
        f"time limit: {limit.seconds} s ({limit.why})" for limit in [time_limit(outputs, request)]
    ]
    if request.health_check:
        notes.insert(0, f"health gate before training: {health.levels_text(outputs.vm_size.name)}")
    notes += [mtbf_note] if mtbf_note else []
    if args.dry_run or not args.max_retries:
        return send(outputs, job, dry_run=args.dry_run, wait=args.wait, as_json=args.json,
                    notes=notes, client=client)  # fmt: skip
    return send_with_retries(outputs, request, args.max_retries, as_json=args.json, notes=notes,
                             client=client)  # fmt: skip
