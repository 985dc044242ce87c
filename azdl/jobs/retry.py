"""`azdl submit --max-retries N`: follow a job, and resubmit it from its last checkpoint when it
failed for a reason worth retrying.

The reason comes from the job's status, Azure ML's error on the run (the text azure-ai-ml's
`jobs.stream` raises as JobException for a failed job) and the job's log lines:

- retried: a low-priority node pre-empted (Azure ML's error `PreemptionError: Nodes of this job
  got pre-empted`, Azure/MachineLearningNotebooks#1242, 2020-11-18); a node or the service lost
  (status `NotResponding`, azure-ai-ml's terminal statuses); NCCL's system and network errors
  (the ncclResult_t codes `ncclSystemError` and `ncclRemoteError` of NVIDIA/nccl's nccl.h, and
  their ncclGetErrorString texts "unhandled system error" and "remote process exited or there
  was a network error"), and NCCL's InfiniBand warnings (`NCCL WARN NET/IB : Got completion
  from peer … with error 12`, as in stas00/ml-engineering debug/pytorch.md); a failed pre-flight
  health gate (`azdl-health: FAIL`, training/health/gate.py): the cluster may give the next
  attempt other nodes (Azure ML can't exclude a node from a job, hence the bound N).
- not retried: the user's code (a Python traceback, an argument the script rejects, or
  `JobFailed: Submitted script failed with a non-zero exit code` with no transient sign,
  Azure/MachineLearningNotebooks#1360, 2021-02-23), a cancelled job, and anything not
  recognised: retrying those would only spend GPU hours again.

Each attempt after the first resumes from the first attempt's checkpoints folder (the
`--resume-from` mechanism) and is tagged with the chain (`azdl.attempt`, `azdl.retry_of`), which
`azdl jobs show` prints.
"""

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

TRANSIENT = (
    (re.compile(r"PreemptionError|got pre-empted", re.I), "a node was pre-empted"),
    (re.compile(r"^azdl-health: FAIL", re.M), "the pre-flight health gate failed"),
    (
        re.compile(
            r"ncclSystemError|ncclRemoteError|unhandled system error|remote process exited or "
            r"there was a network error|NCCL WARN NET/IB"
        ),
        "an NCCL network or system error",
    ),
)
USER_CODE = (
    (re.compile(r"Traceback \(most recent call last\)"), "the script raised a Python exception"),
    (re.compile(r"^(usage: .*\n)?\S+: error: ", re.M), "the script rejected its arguments"),
    (
        re.compile(r"Submitted script failed with a non-zero exit code"),
        "the script exited non-zero",
    ),
)
ATTEMPT_TAG, RETRY_OF_TAG = "azdl.attempt", "azdl.retry_of"


@dataclass(frozen=True)
class Outcome:
    retry: bool
    reason: str


@dataclass(frozen=True)
class Attempt:
    name: str
    status: str
    outcome: Outcome


def classify(status: str, error: str, logs: str) -> Outcome:
    """Whether a job that ended in `status` is worth running again, and why."""
    if status == "Completed":
        return Outcome(False, "completed")
    if status == "Canceled":
        return Outcome(False, "cancelled (by a person or a time limit)")
    if status == "NotResponding":
        return Outcome(True, "Azure ML lost contact with the job (NotResponding)")
    text = f"{error}\n{logs}"
    for pattern, reason in TRANSIENT:
        if pattern.search(text):
            return Outcome(True, reason)
    for pattern, reason in USER_CODE:
        if pattern.search(text):
            return Outcome(False, f"{reason}: fix the code or its arguments, then submit again")
    return Outcome(False, f"{status} for a reason not recognised as transient (see its logs)")


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
