"""`azdl jobs list | show | logs | cancel | download | ledger | report | watch`: follow the
stack's jobs without the Azure CLI, on azure-ai-ml's job operations (`MLClient.jobs`: list, get,
stream, begin_cancel, download). Each subcommand but report and watch takes --json for scripts;
`show` prints the chain of attempts of `azdl submit --max-retries` (the `azdl.attempt` /
`azdl.retry_of` tags), `ledger` where their node-hours went (azdl.jobs.ledger_job), `report` the
same as one HTML page (azdl.ledger_page), `watch` the job live (azdl.jobs.watch_job).
"""

import sys
from datetime import UTC, datetime
from pathlib import Path

from azdl.commands.options import add_stack_options, job_name, positive_int
from azdl.console import print_json
from azdl.errors import AzdlError

# One document format per action, each with its `schema` key (docs/cli.md).
SCHEMAS = {
    "list": "azdl.jobs-list/v1",
    "show": "azdl.job/v1",
    "logs": "azdl.job-logs/v1",
    "cancel": "azdl.job-cancel/v1",
    "download": "azdl.job-download/v1",
    "ledger": "azdl.job-ledger/v1",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "jobs",
        help="list, show, stream logs of, cancel or download the stack's jobs",
        description="Follow the stack's Azure ML jobs without the Azure CLI. Authentication: "
        "azure-identity (az login, managed identity).",
    )
    sub = p.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    commands = {
        "list": (list_jobs, "the experiment's jobs, newest first, with status"),
        "show": (show_job, "one job: status, compute, tags, its chain of attempts"),
        "logs": (job_logs, "stream the job's logs (until it ends, if it is running)"),
        "cancel": (cancel_job, "cancel a job"),
        "download": (download_job, "download a job's logs and outputs (checkpoints...)"),
        "ledger": (job_ledger, "where a job's and its retries' node-hours went, and goodput"),
        "report": (job_report, "the ledger, throughput and retries as one HTML page"),
        "watch": (watch_job, "follow a job live: step, pace, ETA, cost, goodput so far"),
    }
    for name, (func, text) in commands.items():
        q = sub.add_parser(name, help=text, description=text)
        where = add_stack_options(q)
        if name in SCHEMAS:
            q.add_argument(
                "--json",
                action="store_true",
                help=f"print one JSON document ({SCHEMAS[name]}); stable for scripts",
            )
        if name == "list":
            q.add_argument("--experiment", default="azdl", help="experiment (default azdl)")
            q.add_argument("--limit", type=positive_int, default=20, help="jobs shown (default 20)")
        elif name in ("report", "watch"):
            q.add_argument("name", type=job_name, metavar="JOB", nargs="?",
                           help="the job's name (none with --events-dir)")  # fmt: skip
            where.add_argument("--events-dir", type=Path, metavar="DIR",
                               help="a local run's events instead of a job: the folder `azdl "
                               "train` names (events and attempts: DIR)")  # fmt: skip
        else:
            q.add_argument("name", type=job_name, metavar="JOB", help="the job's name")
        if name == "download":
            q.add_argument("--out", type=Path, default=None, help="folder (default ./JOB)")
            q.add_argument(
                "--output",
                metavar="NAME",
                help="one named output only (checkpoints, logs, health, outputs); default: "
                "the job's logs and all its named outputs",
            )
        if name == "report":
            q.add_argument("--html", action="store_true", required=True,
                           help="write the report as one self-contained HTML page (required: "
                           "the one format there is)")  # fmt: skip
            q.add_argument("--out", type=Path, default=None, help="file (default ./JOB.html)")
        if name == "watch":
            q.add_argument("--every", type=positive_int, default=30, metavar="SECONDS",
                           help="seconds between polls (default 30)")  # fmt: skip
            q.add_argument("--steps", type=positive_int, default=None, metavar="N",
                           help="the optimizer steps the job runs, for its ETA")  # fmt: skip
        q.set_defaults(func=func)


def _client(args):
    """The stack's MLClient, and its outputs (for the price of a job's nodes)."""
    from azdl.jobs.stack_outputs import load_outputs
    from azdl.jobs.workspace import ml_client

    outputs = load_outputs(args.stack, args.outputs)
    return ml_client(outputs), outputs


def summary(job, outputs, now) -> dict:
    from azdl.jobs.budget import job_cost
    from azdl.jobs.submit import ATTEMPT_TAG, RETRY_OF_TAG

    created = getattr(getattr(job, "creation_context", None), "created_at", None)
    tags = dict(job.tags or {})
    return {
        "name": job.name,
        "status": getattr(job.status, "value", job.status),  # azure-ai-ml's JobStatus enum
        "experiment": job.experiment_name,
        "display_name": job.display_name,
        "created": created.isoformat() if hasattr(created, "isoformat") else created,
        "compute": getattr(job, "compute", None),
        "studio_url": job.studio_url,
        "attempt": int(tags.get(ATTEMPT_TAG, 1)),
        "retry_of": tags.get(RETRY_OF_TAG),
        "tags": tags,
        "cost": _cost(job_cost(job, outputs, now)),
    }


def _cost(cost) -> dict:
    usd = cost.usd
    return {
        "usd": None if usd is None else round(usd, 2),
        "hours": None if cost.hours is None else round(cost.hours, 3),
        "usd_per_hour": cost.usd_per_hour,
        "rate": cost.note,
    }


def _usd(cost: dict) -> str:
    return "–" if cost["usd"] is None else f"{cost['usd']:.2f} USD"


def _get(client, name: str):
    from azure.core.exceptions import ResourceNotFoundError

    try:
        return client.jobs.get(name)
    except ResourceNotFoundError:
        raise AzdlError(f"no job named {name!r} in the stack's workspace") from None


def list_jobs(args) -> int:
    client, outputs = _client(args)
    now = datetime.now(UTC)
    listed = client.jobs.list()
    jobs = [summary(j, outputs, now) for j in listed if j.experiment_name == args.experiment]
    jobs.sort(key=lambda j: j["created"] or "", reverse=True)
    jobs = jobs[: args.limit]
    if args.json:
        print_json(SCHEMAS["list"], {"experiment": args.experiment, "jobs": jobs})
        return 0
    if not jobs:
        print(f"no jobs in experiment {args.experiment!r}")
    for j in jobs:
        retry = f"  (attempt {j['attempt']}, retry of {j['retry_of']})" if j["retry_of"] else ""
        print(f"{j['name']}  {j['status']}  {j['created'] or ''}  {_usd(j['cost'])}{retry}")
    return 0


def chain(client, job, outputs, now) -> list[dict]:
    """The job's attempts in order: back along retry_of tags, forward through the experiment's
    jobs that name it as their retry_of."""
    from azdl.jobs.submit import RETRY_OF_TAG

    attempts = [summary(job, outputs, now)]
    while attempts[0]["retry_of"]:
        attempts.insert(0, summary(_get(client, attempts[0]["retry_of"]), outputs, now))
    later = {}
    for other in client.jobs.list():
        tags = other.tags or {}
        if tags.get(RETRY_OF_TAG):
            later[tags[RETRY_OF_TAG]] = other
    while attempts[-1]["name"] in later:
        attempts.append(summary(later[attempts[-1]["name"]], outputs, now))
    return attempts


def show_job(args) -> int:
    client, outputs = _client(args)
    job = _get(client, args.name)
    now = datetime.now(UTC)
    info = summary(job, outputs, now) | {"attempts": chain(client, job, outputs, now)}
    if args.json:
        print_json(SCHEMAS["show"], info)
        return 0
    for key in ("name", "status", "experiment", "compute", "created", "studio_url"):
        print(f"{key}: {info[key]}")
    print("tags: " + ", ".join(f"{k}={v}" for k, v in sorted(info["tags"].items())))
    cost = info["cost"]
    if cost["usd"] is None:
        print(f"cost so far: unknown ({cost['rate']})")
    else:
        print(f"cost so far: {_usd(cost)} ({cost['hours']:.2f} h at {cost['rate']}; from the job's "
              "creation, queueing included: an upper bound)")  # fmt: skip
    if len(info["attempts"]) > 1:
        print("attempts:")
        for a in info["attempts"]:
            print(f"  {a['attempt']}. {a['name']}: {a['status']}  {_usd(a['cost'])}")
        known = [a["cost"]["usd"] for a in info["attempts"] if a["cost"]["usd"] is not None]
        print(f"all attempts: {sum(known):.2f} USD")
    return 0


def job_logs(args) -> int:
    from azure.ai.ml.exceptions import JobException

    from azdl.jobs import workspace

    client, _ = _client(args)
    job = _get(client, args.name)
    if args.json:  # the logs of a finished job, as one JSON document
        if job.status not in workspace.TERMINAL:
            raise AzdlError(f"job {args.name} is {job.status}; --json needs a finished job "
                            "(stream it without --json)")  # fmt: skip
        print_json(SCHEMAS["logs"], {"name": job.name, "status": job.status,
                                     "logs": workspace.job_logs(client, job.name)})  # fmt: skip
        return 0
    try:
        client.jobs.stream(args.name)
    except JobException as exc:  # a failed job: its error, then its status
        print(exc, file=sys.stderr)
    status = client.jobs.get(args.name).status
    print(f"{args.name}: {status}", file=sys.stderr)
    return 0 if status == "Completed" else 1


def cancel_job(args) -> int:
    from azdl.jobs.workspace import TERMINAL

    client, _ = _client(args)
    job = _get(client, args.name)
    if job.status in TERMINAL:
        raise AzdlError(f"job {args.name} has already ended ({job.status}); nothing to cancel")
    client.jobs.begin_cancel(args.name).result()
    status = client.jobs.get(args.name).status
    if args.json:
        print_json(SCHEMAS["cancel"], {"name": args.name, "status": status})
    else:
        print(f"{args.name}: cancel requested, now {status}")
    return 0


def download_job(args) -> int:
    from azdl.jobs.workspace import TERMINAL

    client, _ = _client(args)
    job = _get(client, args.name)
    if job.status not in TERMINAL:
        raise AzdlError(f"job {args.name} is still {job.status}; Azure ML downloads a job's "
                        "files once it has ended (follow it with `azdl jobs logs`)")  # fmt: skip
    names = sorted((job.outputs or {}).keys())
    if args.output is not None and args.output not in names:
        raise AzdlError(f"job {args.name} has no output {args.output!r}; its outputs: "
                        f"{', '.join(names) or 'none'}")  # fmt: skip
    out = (args.out or Path(args.name)).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.output is None:
        client.jobs.download(args.name, download_path=str(out), all=True)
    else:
        client.jobs.download(args.name, download_path=str(out), output_name=args.output)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    if args.json:
        print_json(SCHEMAS["download"], {"name": args.name, "folder": str(out), "files": files})
    else:
        print(f"downloaded {len(files)} files of {args.name} to {out}")
    return 0


def job_ledger(args) -> int:
    from azdl import ledger
    from azdl.jobs import ledger_job

    client, outputs = _client(args)
    job = _get(client, args.name)
    now = datetime.now(UTC)
    jobs = [_get(client, a["name"]) for a in chain(client, job, outputs, now)]
    book, gpus, price = ledger_job.chain_ledger(jobs, outputs, now)
    if args.json:
        print_json(SCHEMAS["ledger"], {"name": args.name} | ledger.document(book, gpus, price))
        return 0
    for line in ledger.lines(book, gpus, price):
        print(line)
    return 0


def _chain_jobs(client, job, outputs, now) -> list:
    """The Job objects of the job's chain of attempts, in order."""
    return [_get(client, a["name"]) for a in chain(client, job, outputs, now)]


def job_report(args) -> int:
    from azdl import ledger, ledger_page
    from azdl.jobs import ledger_job

    if is_local_run(args, "report"):
        return local_report(args)
    client, outputs = _client(args)
    job = _get(client, args.name)
    now = datetime.now(UTC)
    jobs = _chain_jobs(client, job, outputs, now)
    found = ledger_job.chain_events(jobs, outputs)
    book, gpus, price = ledger_job.chain_ledger(jobs, outputs, now, found)
    retries = [ledger_page.Retry(j.name, getattr(j.status, "value", j.status),
                                 ledger_job.verdict(client, j)) for j in jobs]  # fmt: skip
    title = f"azdl ledger of {args.name} ({now:%Y-%m-%d %H:%M} UTC)"
    text = ledger_page.page(title, ledger.document(book, gpus, price), found, retries)
    out = args.out or Path(f"{args.name}.html")
    out.write_text(text)
    print(f"wrote {out}")
    return 0


def watch_job(args) -> int:
    from azdl import ledger
    from azdl.console import make_console
    from azdl.jobs import watch_job as watching

    if is_local_run(args, "watch"):
        title = f"azdl jobs watch --events-dir {args.events_dir}"

        def poll():
            return watching.local_snapshot(args.events_dir, args.steps)

        poll()  # a folder with no run in it: one line, before the first poll is shown
    else:
        client, outputs = _client(args)
        _get(client, args.name)  # an unknown job: one line, before the first poll
        title = f"azdl jobs watch {args.name}"

        def poll():
            jobs = _chain_jobs(client, client.jobs.get(args.name), outputs, datetime.now(UTC))
            return watching.snapshot(jobs, outputs, watching.NOW(), args.steps)

    if sys.stdout.isatty():
        from rich.live import Live
        from rich.table import Table

        def table(snap):
            grid = Table(show_header=False, title=title)
            for name, value in watching.fields(snap):
                grid.add_row(name, value)
            return grid

        with Live(console=make_console(), auto_refresh=False) as live:
            last = watching.follow(poll, args.every, lambda s: live.update(table(s), refresh=True))
    else:
        last = watching.follow(poll, args.every, lambda s: print(watching.line(s), flush=True))
    for text in ledger.lines(last.book, last.gpus, last.price):
        print(text)
    return 0 if last.status == "Completed" else 1


def is_local_run(args, command: str) -> bool:
    """Whether `azdl jobs COMMAND` is given a local run's --events-dir (else a JOB): one of the
    two, or one error line."""
    if args.events_dir is not None and args.name is not None:
        raise AzdlError(f"azdl jobs {command}: a JOB ({args.name}) or --events-dir, not both")
    if args.events_dir is None and args.name is None:
        raise AzdlError(f"azdl jobs {command}: name a JOB (with -s STACK or --outputs FILE), or "
                        "a local run's --events-dir DIR")  # fmt: skip
    return args.events_dir is not None


def local_report(args) -> int:
    """`azdl jobs report --events-dir DIR --html`: the page of a local run (`azdl train`'s)."""
    from azdl import ledger, ledger_page, local_ledger

    folder = args.events_dir
    book, found = local_ledger.book(folder)
    retries = [ledger_page.Retry(a.name, "failed" if a.failed else "completed",
                                 "a local run: its output says why" if a.failed else "completed")
               for a in book.attempts]  # fmt: skip
    title = f"azdl ledger of the local run in {folder}"
    text = ledger_page.page(title, ledger.document(book, 0, None), found, retries)
    out = args.out or Path(f"{folder.resolve().parent.name}.html")
    out.write_text(text)
    print(f"wrote {out}")
    return 0
