"""Sending jobs to the stack's workspace: run ids, the quota check first, one submission
(optionally followed to its end), or a chain of attempts resubmitted under `azdl.jobs.retry`'s
policy."""

import contextlib
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from azdl.console import print_json
from azdl.jobs import export, quota
from azdl.jobs.request import JobRequest
from azdl.jobs.retry import Outcome, classify
from azdl.jobs.spec import build_job

JSON_SCHEMA = "azdl.submit-result/v1"
# The chain of attempts, on each job: `azdl jobs show` follows it.
ATTEMPT_TAG, RETRY_OF_TAG = "azdl.attempt", "azdl.retry_of"


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


def send(outputs, job, *, dry_run: bool, wait: bool, as_json: bool = False) -> int:
    """Print the job (dry run) or submit it, then optionally stream its logs until it ends
    (`as_json`: the result as one JSON document on stdout, the logs on stderr)."""
    if dry_run:
        code = "; `code:` is relative to the current folder" if job.code else ""
        print(
            f"# azdl --dry-run: the job for {outputs.source} as Azure ML CLI v2 YAML, built "
            f"locally; nothing was sent (`az ml job create -f` takes this{code})"
        )
        print(export.job_yaml(job, Path.cwd()), end="")
        return 0

    from azdl.propagation import code_upload_refusals, while_propagating

    client = ml_client_checked(outputs, job.resources.instance_count or 1)
    created = while_propagating(
        lambda: client.jobs.create_or_update(job),
        f"submitting {job.name or 'the job'}",
        wrapped=code_upload_refusals(),
    )
    if not as_json:
        print(f"submitted {created.name}: {created.studio_url}")
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


def send_with_retries(outputs, request: JobRequest, max_retries: int) -> int:
    """Submit the job and follow it, resubmitting it from its checkpoints after a failure the
    retry policy calls transient, at most `max_retries` times."""
    client = ml_client_checked(outputs, request.nodes)
    return follow(client, retry_builder(outputs, request), max_retries)


def retry_builder(outputs, request: JobRequest):
    """Attempt n of the job: the first as asked; later ones named <name>-retryN, resuming from
    the first attempt's checkpoints (or the --resume-from job's, when one was given)."""

    def build(number: int, first: str | None):
        if number == 1:
            return build_job(outputs, request)
        again = replace(request, run_id=f"{request.run_id}-retry{number - 1}",
                        resume_from=request.resume_from or first)  # fmt: skip
        return build_job(outputs, again)

    return build


@dataclass(frozen=True)
class Attempt:
    name: str
    status: str
    outcome: Outcome


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


def follow(client, build: Callable[[int, str | None], object], max_retries: int,
           stream: bool = True) -> int:  # fmt: skip
    """Submit `build(1, None)`, then `build(n, first_name)` after each retryable failure, at most
    `max_retries` times; print the chain of attempts. Exit status 0 when one completed."""
    from azdl.jobs.workspace import job_logs
    from azdl.propagation import code_upload_refusals, while_propagating

    attempts: list[Attempt] = []
    job = build(1, None)
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
        status, error = watch(client, created.name, stream)
        logs = job_logs(client, created.name) if status == "Failed" else ""
        outcome = classify(status, error, logs)
        attempts.append(Attempt(created.name, status, outcome))
        if status == "Completed" or not outcome.retry:
            break
        if number > max_retries:
            break
        print(f"attempt {number} {status}: {outcome.reason}; resubmitting from its checkpoints")
        job = build(number + 1, attempts[0].name)
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
