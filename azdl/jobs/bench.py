"""The scaling sweep of `azdl bench`: one synthetic-data run per size, on the stack's cluster
(one job after another) or as local workers, and the report rewritten after each run."""

import subprocess
from pathlib import Path

from rich.console import Console

from azdl.envs import work_dir
from azdl.errors import AzdlError
from azdl.jobs import quota
from azdl.jobs.azureml import processes_per_node
from azdl.jobs.report import Run, write_report
from azdl.jobs.request import JobRequest
from azdl.jobs.spec import build_job, validate
from azdl.jobs.submit import new_run_id
from azdl.launchers import DEFAULT_LAUNCHER, DEFAULT_TRANSPORT
from azdl.local import check_training_options, launch_command, local_env
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


def check_local(
    framework: str,
    workers: list[int],
    script_args: tuple[str, ...],
    launcher: str = DEFAULT_LAUNCHER,
    transport: str = DEFAULT_TRANSPORT,
) -> None:
    """The training options as the script will see them, and its environment, for each size."""
    for n in workers:
        check_training_options(framework, [*LOCAL_ARGS, *script_args], n, "azdl bench --local")
        launch_command(framework, n, launcher, [], transport=transport)


def run_local(
    framework: str,
    workers: list[int],
    args: tuple[str, ...],
    out: Path,
    launcher: str = DEFAULT_LAUNCHER,
    transport: str = DEFAULT_TRANSPORT,
) -> list[Run]:
    console = Console(stderr=True)
    how = "torchrun, Gloo" if launcher == "torchrun" else f"Horovod, {transport}"
    where = f"local CPU workers ({how})"
    runs: list[Run] = []
    for n in workers:
        log = out / f"workers-{n}.log"
        cmd = launch_command(framework, n, launcher, [*LOCAL_ARGS, *args], transport=transport)
        with console.status(f"{framework}: {n} local worker(s), log in {log}"), log.open("w") as f:
            code = subprocess.call(
                cmd,
                env=local_env(launcher, n),
                cwd=work_dir(),
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        record, error = record_of(log.read_text(errors="replace"))
        status = "Completed" if code == 0 else f"exit {code}"
        console.print(f"{n} worker(s): {status}, images/sec {(record or {}).get('images_per_sec')}")
        runs.append(Run(1, n, status, str(log), record, error))
        write_report(runs, out, title_of(runs, where), "workers", "worker")
    return runs


def cluster_requests(
    outputs,
    framework: str,
    nodes: list[int],
    script_args: tuple[str, ...],
    launcher: str = DEFAULT_LAUNCHER,
) -> list[JobRequest]:
    """One synthetic-data request per size, every one checked: nothing is created or submitted
    before this returns."""
    user_args = (*CLUSTER_ARGS, *script_args)
    requests = [
        JobRequest(
            framework, n, "synthetic", new_run_id(f"{framework}-{n}n"), user_args,
            launcher=launcher,
        )
        for n in nodes
    ]  # fmt: skip
    for request in requests:
        validate(outputs, request)
    return requests


def cluster_run(
    client,
    outputs,
    request: JobRequest,
    poll_seconds: float,
    timeout_minutes: float,
    console: Console,
) -> Run:
    """Submit one size, follow it to its end and read its record. Whatever goes wrong (the
    submission refused, a status poll or log download failing, the wait's limit) becomes a run
    with status "error" and the message, so the sizes after it still run."""
    from azdl.jobs.workspace import WaitTimeout, job_logs, wait
    from azdl.propagation import code_upload_refusals, while_propagating

    workers = request.nodes * processes_per_node(outputs)
    name, status = request.run_id, None
    try:
        job = build_job(outputs, request)
        name = while_propagating(
            lambda: client.jobs.create_or_update(job),
            f"submitting {name}",
            wrapped=code_upload_refusals(),
        ).name
        with console.status(f"{name}: {request.nodes} node(s)") as status_line:
            status = wait(
                client,
                name,
                poll_seconds,
                on_status=lambda s: status_line.update(f"{name}: {s}"),
                timeout_seconds=timeout_minutes * 60,
            )
        record, error = record_of(job_logs(client, name))
    except Exception as exc:  # any failure is reported for this size only
        message = str(exc) if isinstance(exc, AzdlError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, WaitTimeout):  # the next size must not share the cluster with it
            message += f"; {cancel(client, name, poll_seconds)}"
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


def run_cluster(
    outputs, requests: list[JobRequest], out: Path, poll_seconds: float, timeout_minutes: float
) -> list[Run]:
    """Each size in turn, followed to its end; the report rewritten after each."""
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
        runs.append(cluster_run(client, outputs, request, poll_seconds, timeout_minutes, console))
        # kept if the bench is stopped
        write_report(runs, out, title_of(runs, where), *unit, vm_size=size.name)
    return runs
