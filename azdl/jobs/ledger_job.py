"""The ledger of a cluster job and its retries (`azdl jobs ledger`): each attempt's timeline from
azure-ai-ml's Job object, its events from its `logs` output (training.events), its nodes' price
from the job's rate tag or the stack's price table (azdl.jobs.budget).

Which timeline fields are Azure ML's and which are inferred (docs/jobs.md, "The ledger"):
- created: `creation_context.created_at` (the REST resource's systemData.createdAt), documented;
- status: `status`, documented; an attempt that ended other than Completed is failed;
- end: `creation_context.last_modified_at` (systemData.lastModifiedAt) once the status is
  terminal: documented as the last change, inferred to be the end; now while it runs;
- start: inferred, the attempt's first event (node 0's `up`, the job command's first step):
  Azure ML's job resource has no start time. Time from created to start is shown as queued, and
  the image pull before the command is in it."""

import tempfile
from datetime import datetime
from fractions import Fraction
from pathlib import Path

from azdl import ledger
from azdl.jobs import budget
from training import events


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def attempt_of(job, found: list[dict], now: datetime) -> ledger.Attempt:
    """One billed attempt from azure-ai-ml's Job and its events."""
    from azdl.jobs.workspace import TERMINAL

    context = job.creation_context
    created = _ms(context.created_at)
    status = getattr(job.status, "value", job.status)
    end = _ms(context.last_modified_at if status in TERMINAL else now)
    mine = [e["t_ms"] for e in found if e["attempt"] == job.name]
    start = min(mine) if mine else created
    nodes = getattr(getattr(job, "resources", None), "instance_count", None) or 1
    failed = status in TERMINAL and status != "Completed"  # a running one has lost nothing yet
    return ledger.Attempt(job.name, start, max(end, start), nodes, failed, created)


def job_events(client, name: str) -> list[dict]:
    """The events in the job's `logs` output (downloaded to a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="azdl-events-") as tmp:
        client.jobs.download(name, download_path=tmp, output_name="logs")
        return events.read(Path(tmp))


def node_price(job, outputs) -> Fraction | None:
    """One node's USD per hour: the job's rate tag (all its nodes) over its node count, else the
    stack's price table."""
    tags = job.tags or {}
    nodes = getattr(getattr(job, "resources", None), "instance_count", None) or 1
    if budget.RATE_TAG in tags:
        return Fraction(tags[budget.RATE_TAG]) / nodes
    rate, _note = budget.hourly_rate(outputs, 1)
    return None if rate is None else Fraction(str(rate))


def chain_events(client, jobs: list) -> list[dict]:
    """The events of `jobs`, a job and its retries, in time order."""
    found = [e for job in jobs for e in job_events(client, job.name)]
    return sorted(found, key=lambda e: e["t_ms"])


def chain_ledger(
    client, jobs: list, outputs, now: datetime, found: list[dict] | None = None
) -> tuple[ledger.Ledger, int, Fraction]:
    """(the ledger of `jobs`, a job and its retries in order, GPUs per node, USD per node-hour),
    from `found`, their events (chain_events), downloaded here when not given."""
    found = chain_events(client, jobs) if found is None else found
    attempts = [attempt_of(job, found, now) for job in jobs]
    return ledger.ledger(attempts, found), outputs.vm_size.gpus, node_price(jobs[-1], outputs)


def verdict(client, job) -> str:
    """What became of one attempt: azdl.jobs.retry.classify's reason from its logs once it has
    ended, as `azdl submit --max-retries` decides; Azure ML's error text reaches only the log
    stream, not the Job object, so it is not weighed here."""
    from azdl.jobs.retry import classify
    from azdl.jobs.workspace import TERMINAL, job_logs

    status = getattr(job.status, "value", job.status)
    if status not in TERMINAL:
        return f"{status}: not ended yet"
    logs = job_logs(client, job.name) if status == "Failed" else ""
    return classify(status, "", logs).reason
