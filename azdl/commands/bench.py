"""`azdl bench`: the same synthetic-data job at several sizes, and the scaling report.

On the cluster: one job per node count (default 1, 2, 4, … up to the cluster's maximum), run
one after another so they never share the cluster, each followed to its end; rank 0's
throughput record is read from the job's logs. With --local: 1 and 2 Horovod workers on this
machine through `azdl train`'s launcher, in the training environment. Either way the report is
results.json, results.md (nodes, GPUs/workers, images/sec, per GPU, efficiency) and scaling.png,
rewritten after every run so that an interrupted bench keeps what it measured. A size that fails
(or whose submission, status or logs fail) stays in the report, and the bench exits non-zero.
"""

import argparse
import subprocess
import time
from pathlib import Path

from rich.console import Console

from azdl.commands.options import add_script_args, add_stack_options, script_args
from azdl.envs import REPO_ROOT
from azdl.errors import AzdlError
from azdl.jobs import quota
from azdl.jobs.azureml import processes_per_node
from azdl.jobs.report import Run, write_report
from azdl.jobs.request import JobRequest
from azdl.jobs.spec import build_job, validate
from azdl.jobs.stack_outputs import load_outputs
from azdl.jobs.submit import new_run_id
from azdl.local import check_training_options, launch_command, local_env
from training.flavours import DEFAULT_FRAMEWORK, FRAMEWORKS
from training.throughput import parse_throughput_lines

# Short synthetic runs: enough timed steps for a stable median, little cluster time.
CLUSTER_ARGS = ("--epochs", "1", "--steps-per-epoch", "120", "--timing-warmup-steps", "20")
# What CPU workers get through in about a minute each (ResNet50 at 64 px). One framework thread
# per worker: each worker stands for one device, as a GPU does on the cluster, so the runs
# measure what adding workers gives (not how one process uses more cores).
LOCAL_ARGS = (
    "--image-size", "64", "--batch-size", "16", "--epochs", "1", "--steps-per-epoch", "20",
    "--timing-warmup-steps", "5", "--threads", "1",
)  # fmt: skip


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


def default_nodes(max_nodes: int) -> list[int]:
    """1, 2, 4, … up to max_nodes, and max_nodes itself."""
    nodes, n = [], 1
    while n < max_nodes:
        nodes.append(n)
        n *= 2
    return [*nodes, max_nodes]


def record_of(text: str) -> tuple[dict | None, str | None]:
    records = parse_throughput_lines(text)
    if records:
        return records[-1], None
    return None, "no throughput line in the log"


def title_of(runs: list[Run], where: str) -> str:
    record = next((r.record for r in runs if r.record), None)
    if record is None:
        return f"scaling, {where}"
    return (
        f"{record['framework']} {record['model']} {record['image_size']} px, "
        f"batch {record['batch_per_worker']}/worker, {record['precision']}\n{where}"
    )


def run_local(framework: str, workers: list[int], args: tuple[str, ...], out: Path) -> list[Run]:
    console = Console(stderr=True)
    where = "local CPU workers (Horovod, Gloo)"
    runs: list[Run] = []
    for n in workers:
        log = out / f"workers-{n}.log"
        cmd = launch_command(framework, n, "gloo", [*LOCAL_ARGS, *args])
        with console.status(f"{framework}: {n} local worker(s), log in {log}"), log.open("w") as f:
            code = subprocess.call(
                cmd, env=local_env(), cwd=REPO_ROOT, stdout=f, stderr=subprocess.STDOUT
            )
        record, error = record_of(log.read_text(errors="replace"))
        status = "Completed" if code == 0 else f"exit {code}"
        console.print(f"{n} worker(s): {status}, images/sec {(record or {}).get('images_per_sec')}")
        runs.append(Run(1, n, status, str(log), record, error))
        write_report(runs, out, title_of(runs, where), "workers", "worker")
    return runs


def cluster_run(client, outputs, request: JobRequest, args, console: Console) -> Run:
    """Submit one size, follow it to its end and read its record. Whatever goes wrong (the
    submission refused, a status poll or log download failing, the wait's limit) becomes a run
    with status "error" and the message, so the sizes after it still run."""
    from azdl.jobs.workspace import WaitTimeout, job_logs, wait
    from azdl.propagation import while_propagating

    workers = request.nodes * processes_per_node(outputs)
    name, status = request.run_id, None
    try:
        job = build_job(outputs, request)
        name = while_propagating(
            lambda: client.jobs.create_or_update(job), f"submitting {name}"
        ).name
        with console.status(f"{name}: {request.nodes} node(s)") as status_line:
            status = wait(
                client,
                name,
                args.poll_seconds,
                on_status=lambda s: status_line.update(f"{name}: {s}"),
                timeout_seconds=args.timeout_minutes * 60,
            )
        record, error = record_of(job_logs(client, name))
    except Exception as exc:  # any failure is reported for this size only
        message = str(exc) if isinstance(exc, AzdlError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, WaitTimeout):  # the next size must not share the cluster with it
            message += f"; {cancel(client, name, args.poll_seconds)}"
        elif status is not None:
            message = f"job {status}, then reading its logs failed: {message}"
        console.print(f"{name}: error: {message}")
        return Run(request.nodes, workers, "error", name, None, message)
    console.print(f"{name}: {status}, images/sec {(record or {}).get('images_per_sec')}")
    return Run(request.nodes, workers, status, name, record, error)


CANCEL_WAIT_S = 600.0


def cancel(client, name: str, poll_seconds: float) -> str:
    """Cancel the job and wait until it has stopped, so that the next size does not share the
    cluster with it; say how that went (reported with the run)."""
    from azdl.jobs.workspace import wait

    try:
        client.jobs.begin_cancel(name)
        status = wait(client, name, poll_seconds, timeout_seconds=CANCEL_WAIT_S)
    except Exception as exc:  # reported with the run; the sweep goes on
        return f"cancelling it failed ({type(exc).__name__}: {exc})"
    return f"cancelled ({status})"


def cluster_plan(args: argparse.Namespace):
    """(stack outputs, one request per size), every size checked: nothing is created or
    submitted before this returns."""
    outputs = load_outputs(args.stack, args.outputs)
    nodes = counts(args.nodes, "--nodes") if args.nodes else default_nodes(outputs.max_nodes)
    user_args = (*CLUSTER_ARGS, *script_args(args))
    requests = [
        JobRequest(args.framework, n, "synthetic", new_run_id(f"{args.framework}-{n}n"), user_args)
        for n in nodes
    ]
    for request in requests:
        validate(outputs, request)
    return outputs, requests


def run_cluster(args: argparse.Namespace, outputs, requests: list[JobRequest], out: Path):
    from azdl.jobs.workspace import ml_client
    from azdl.propagation import while_propagating

    size = outputs.vm_size
    where = f"{size.name}{' (InfiniBand)' if size.infiniband else ''}"
    unit = ("GPUs", "GPU") if size.gpus else ("processes", "process")
    console = Console(stderr=True)
    client = ml_client(outputs)
    largest = max(r.nodes for r in requests)  # the sizes run one after another
    while_propagating(lambda: quota.check(client, outputs, largest), "checking the quota")
    out.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    for request in requests:
        runs.append(cluster_run(client, outputs, request, args, console))
        # kept if the bench is stopped
        write_report(runs, out, title_of(runs, where), *unit, vm_size=size.name)
    return runs


def run(args: argparse.Namespace) -> int:
    """Every input is checked (and, on the cluster, the sign-in) before the report folder is
    made."""
    out = args.out or REPO_ROOT / "runs" / time.strftime("bench-%Y%m%d-%H%M%S", time.gmtime())
    if args.local:
        workers = counts(args.workers, "--workers")
        for n in workers:  # the training options as the script will see them; its environment
            check_training_options(
                args.framework, [*LOCAL_ARGS, *script_args(args)], n, "azdl bench --local"
            )
            launch_command(args.framework, n, "gloo", [])
        out.mkdir(parents=True, exist_ok=True)
        runs = run_local(args.framework, workers, script_args(args), out)
    else:
        runs = run_cluster(args, *cluster_plan(args), out)
    print((out / "results.md").read_text(), end="")
    print(f"\nwrote {out / 'results.json'}, {out / 'results.md'} and {out / 'scaling.png'}")
    return 0 if all(r.measured for r in runs) else 1
