"""Sending jobs to the stack's workspace: run ids, the quota check first, one submission
(optionally followed to its end), or a chain of attempts resubmitted under `azdl.jobs.retry`'s
policy."""

import contextlib
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from azdl.console import print_json
from azdl.errors import AzdlError
from azdl.jobs import budget, export, quota
from azdl.jobs.request import JobRequest
from azdl.jobs.retry import Outcome, classify

JSON_SCHEMA = "azdl.submit-result/v1"
# The chain of attempts, on each job: `azdl jobs show` follows it.
ATTEMPT_TAG, RETRY_OF_TAG = "azdl.attempt", "azdl.retry_of"
# How `follow` times the attempts (from submission to end: an upper bound on their run time).
CLOCK = time.monotonic


def new_run_id(what: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"azdl-{what}-{stamp}-{secrets.token_hex(2)}"


def ml_client_checked(outputs, nodes: int):
    """The workspace client, once the job's cores are known to be free (azdl.jobs.quota)."""
    from azdl.jobs.workspace import ml_client
    from azdl.propagation import while_propagating

    client = ml_client(outputs)
    while_propagating(lambda: quota.check(client, outputs, nodes), "checking the cluster's quota")
    return client


def print_notes(notes: Sequence[str], as_json: bool) -> None:
    """Lines about the job (its time limit, its health gate) as YAML comments; on stderr with
    --json, where stdout is the JSON alone."""
    for note in notes:
        print(f"# {note}", file=sys.stderr if as_json else sys.stdout)


def send(outputs, job, *, dry_run: bool, wait: bool, as_json: bool = False,
         notes: Sequence[str] = (), client=None) -> int:  # fmt: skip
    """Print the job (dry run) or submit it, then optionally stream its logs until it ends
    (`as_json`: the result as one JSON document on stdout, the logs on stderr). `notes` follow
    the dry run's header or the submission's first line. `client`: one ml_client_checked made
    already."""
    if dry_run:
        code = "; `code:` is relative to the current folder" if job.code else ""
        print(
            f"# azdl --dry-run: the job for {outputs.source} as Azure ML CLI v2 YAML, built "
            f"locally; nothing was sent (`az ml job create -f` takes this{code})"
        )
        print_notes(notes, as_json)
        print(export.job_yaml(job, Path.cwd()), end="")
        return 0

    from azdl.propagation import code_upload_refusals, while_propagating

    client = client or ml_client_checked(outputs, job.resources.instance_count or 1)
    created = while_propagating(
        lambda: client.jobs.create_or_update(job),
        f"submitting {job.name or 'the job'}",
        wrapped=code_upload_refusals(),
    )
    if not as_json:
        print(f"submitted {created.name}: {created.studio_url}")
    print_notes(notes, as_json)
    status = created.status
    if wait:
        from azure.ai.ml.exceptions import JobException

        try:
            with contextlib.redirect_stdout(sys.stderr if as_json else sys.stdout):
                client.jobs.stream(created.name)
        except JobException as exc:  # raised for a job that failed; its status says so below
            print(exc, file=sys.stderr)
        status = client.jobs.get(created.name).status
        if not as_json:
            print(f"{created.name}: {status}", file=sys.stderr)
    if as_json:
        print_json(JSON_SCHEMA, {"name": created.name, "url": created.studio_url, "status": status})
    return 0 if not wait or status == "Completed" else 1


def send_with_retries(outputs, request: JobRequest, max_retries: int, as_json: bool = False,
                      notes: Sequence[str] = (), client=None) -> int:  # fmt: skip
    """Submit the job and follow it, resubmitting it from its checkpoints after a failure the
    retry policy calls transient, at most `max_retries` times (`as_json`: the attempts go to
    stderr, the result, with the chain of attempts, is one JSON document on stdout). `notes`
    follow the sign-in. `client`: one ml_client_checked made already."""
    client = client or ml_client_checked(outputs, request.nodes)
    print_notes(notes, as_json)
    if not as_json:
        return follow(client, retry_builder(outputs, request), max_retries)
    attempts: list[Attempt] = []
    with contextlib.redirect_stdout(sys.stderr):
        code = follow(client, retry_builder(outputs, request), max_retries, attempts=attempts)
    last = attempts[-1]
    print_json(JSON_SCHEMA, {
        "name": last.name, "url": last.url, "status": last.status,
        "attempts": [{"name": a.name, "status": a.status, "reason": a.outcome.reason}
                     for a in attempts],
    })  # fmt: skip
    return code


def retry_builder(outputs, request: JobRequest):
    """Attempt n of the job: the first as asked; later ones named <name>-retryN, resuming from
    the first attempt's checkpoints (or the --resume-from job's, when one was given), with what
    is left of --max-cost after `spent_s` seconds of the earlier attempts."""
    # Here, not at the top: `azdl submit --help` reads JSON_SCHEMA, and spec reads the stack
    # outputs' pydantic model.
    from azdl.jobs.spec import build_job

    def build(number: int, first: str | None, spent_s: float = 0.0):
        if number == 1:
            return build_job(outputs, request)
        spent = 0.0
        if request.max_cost is not None:
            rate, _note = budget.hourly_rate(outputs, request.nodes)
            spent = spent_s / 3600 * (rate or 0.0)
        again = replace(request, run_id=f"{request.run_id}-retry{number - 1}",
                        resume_from=request.resume_from or first, spent_usd=spent)  # fmt: skip
        return build_job(outputs, again)

    return build


@dataclass(frozen=True)
class Attempt:
    name: str
    status: str
    outcome: Outcome
    url: str = ""  # the job in Azure ML studio


def watch(client, name: str, stream: bool) -> tuple[str, str]:
    """Follow the job to its end: (status, Azure ML's error text for a failed job)."""
    from azure.ai.ml.exceptions import JobException

    from azdl.jobs.workspace import TERMINAL, wait

    error = ""
    if stream:
        try:
            client.jobs.stream(name)
        except JobException as exc:  # a failed job, carrying its error; or Ctrl-C while streaming
            if client.jobs.get(name).status not in TERMINAL:
                raise KeyboardInterrupt from exc  # stop following; the job goes on in Azure ML
            error = str(exc)
            print(error, file=sys.stderr)
    return wait(client, name), error


def follow(client, build: Callable[..., object], max_retries: int,
           stream: bool = True, attempts: list | None = None) -> int:  # fmt: skip
    """Submit `build(1, None)`, then `build(n, first_name, seconds_spent)` after each retryable
    failure, at most `max_retries` times; print the chain of attempts (and add them to
    `attempts`, if given). Exit status 0 when one completed."""
    from azdl.jobs.workspace import job_logs
    from azdl.propagation import code_upload_refusals, while_propagating

    attempts = [] if attempts is None else attempts
    job = build(1, None)
    spent_s = 0.0
    while True:
        number = len(attempts) + 1
        job.tags = dict(job.tags or {}) | {ATTEMPT_TAG: str(number)}
        if attempts:
            job.tags[RETRY_OF_TAG] = attempts[-1].name
        created = while_propagating(
            lambda job=job: client.jobs.create_or_update(job),
            f"submitting attempt {number}",
            wrapped=code_upload_refusals(),
        )
        print(f"attempt {number}: submitted {created.name}: {created.studio_url}")
        started = CLOCK()
        status, error = watch(client, created.name, stream)
        spent_s += CLOCK() - started
        logs = job_logs(client, created.name) if status == "Failed" else ""
        outcome = classify(status, error, logs)
        attempts.append(Attempt(created.name, status, outcome, created.studio_url))
        if status == "Completed" or not outcome.retry:
            break
        if number > max_retries:
            break
        try:
            job = build(number + 1, attempts[0].name, spent_s)
        except AzdlError as exc:  # --max-cost: what is left buys too little
            why = f"{outcome.reason}, but the budget is spent: {exc}"
            attempts[-1] = Attempt(created.name, status, Outcome(False, why))
            break
        print(f"attempt {number} {status}: {outcome.reason}; resubmitting from its checkpoints")
    print_chain(attempts, max_retries)
    return 0 if attempts[-1].status == "Completed" else 1


def print_chain(attempts: list[Attempt], max_retries: int) -> None:
    print("attempts:")
    for number, attempt in enumerate(attempts, 1):
        print(f"  {number}. {attempt.name}: {attempt.status} ({attempt.outcome.reason})")
    last = attempts[-1]
    if last.status == "Completed":
        return
    retried = len(attempts) - 1
    if not last.outcome.retry:
        print(f"not retried: {last.outcome.reason}", file=sys.stderr)
    else:
        print(f"gave up: the job failed {len(attempts)} times, and --max-retries {max_retries} "
              f"allowed {retried} retries; the checkpoints of {attempts[0].name} are kept for "
              f"--resume-from {attempts[0].name}", file=sys.stderr)  # fmt: skip
