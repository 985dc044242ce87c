"""`azdl bench`: the same synthetic-data job at several sizes, and the scaling report.

On the cluster: one job per node count (default 1, 2, 4, … up to the cluster's maximum), run
one after another so they never share the cluster, each followed to its end; rank 0's
throughput record is read from the job's logs. With --local: 1 and 2 Horovod workers on this
machine through `azdl train`'s launcher, in the training environment. Either way the report is
results.json, results.md (nodes, GPUs/workers, images/sec, per GPU, efficiency) and scaling.png.
"""

import argparse
import subprocess
import time
from pathlib import Path

from rich.console import Console

from azdl.commands.submit import add_stack_options, new_run_id, script_args
from azdl.commands.train import FRAMEWORK_MODULES, launch_command
from azdl.envs import REPO_ROOT, training_env
from azdl.errors import AzdlError
from azdl.jobs.report import Run, write_report
from azdl.jobs.spec import JobRequest, build_job, processes_per_node, validate
from azdl.jobs.stack_outputs import load_outputs
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
    p.add_argument("--framework", choices=sorted(FRAMEWORK_MODULES), default="keras")
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
        "script_args", nargs=argparse.REMAINDER, help="arguments for the training script"
    )
    p.set_defaults(func=run)


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
    runs = []
    for n in workers:
        log = out / f"workers-{n}.log"
        cmd = launch_command(framework, n, "gloo", [*LOCAL_ARGS, *args])
        with console.status(f"{framework}: {n} local worker(s), log in {log}"), log.open("w") as f:
            env = training_env({"TF_CPP_MIN_LOG_LEVEL": "1"})  # no TensorFlow INFO lines
            code = subprocess.call(cmd, env=env, cwd=REPO_ROOT, stdout=f, stderr=subprocess.STDOUT)
        record, error = record_of(log.read_text(errors="replace"))
        status = "Completed" if code == 0 else f"exit {code}"
        console.print(f"{n} worker(s): {status}, images/sec {(record or {}).get('images_per_sec')}")
        runs.append(Run(1, n, status, str(log), record, error))
    return runs


def run_cluster(args: argparse.Namespace) -> tuple[list[Run], str, str]:
    from azdl.jobs.workspace import job_logs, ml_client, wait

    outputs = load_outputs(args.stack, args.outputs)
    nodes = counts(args.nodes, "--nodes") if args.nodes else default_nodes(outputs.max_nodes)
    user_args = (*CLUSTER_ARGS, *script_args(args))
    requests = [
        JobRequest(args.framework, n, "synthetic", new_run_id(args.framework, n), user_args)
        for n in nodes
    ]
    for request in requests:  # every size is checked before the first job is submitted
        validate(outputs, request)
    console = Console(stderr=True)
    client = ml_client(outputs)
    runs = []
    for request in requests:
        job = client.jobs.create_or_update(build_job(outputs, request))
        with console.status(f"{job.name}: {request.nodes} node(s)") as status_line:
            status = wait(
                client,
                job.name,
                args.poll_seconds,
                on_status=lambda s, name=job.name: status_line.update(f"{name}: {s}"),
            )
        record, error = record_of(job_logs(client, job.name))
        console.print(f"{job.name}: {status}, images/sec {(record or {}).get('images_per_sec')}")
        workers = request.nodes * processes_per_node(outputs)
        runs.append(Run(request.nodes, workers, status, job.name, record, error))
    size = outputs.vm_size
    where = f"{size.name}{' (InfiniBand)' if size.infiniband else ''}"
    return runs, where, "GPUs" if size.gpus else "processes"


def run(args: argparse.Namespace) -> int:
    out = args.out or REPO_ROOT / "runs" / time.strftime("bench-%Y%m%d-%H%M%S", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    if args.local:
        workers = counts(args.workers, "--workers")
        runs = run_local(args.framework, workers, script_args(args), out)
        where, unit = "local CPU workers (Horovod, Gloo)", "workers"
    else:
        runs, where, unit = run_cluster(args)
    paths = write_report(runs, out, title_of(runs, where), unit)
    print(paths["table"].read_text(), end="")
    print(f"\nwrote {paths['json']}, {paths['table']} and {paths['plot']}")
    return 0 if all(r.record for r in runs) else 1
