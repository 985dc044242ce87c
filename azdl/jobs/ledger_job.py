"""The ledger of a cluster job and its retries (`azdl jobs ledger`): each attempt's timeline from
azure-ai-ml's Job object, its events from its `logs` output in the outputs container
(training.events), its nodes' price from the job's rate tag or the stack's price table
(azdl.jobs.budget).

Which timeline fields are Azure ML's and which are inferred (docs/jobs.md, "The ledger"):
- created: `creation_context.created_at` (the REST resource's systemData.createdAt), documented;
- status: `status`, documented; an attempt that ended other than Completed is failed;
- end: `creation_context.last_modified_at` (systemData.lastModifiedAt) once the status is
  terminal: documented as the last change, inferred to be the end; now while it runs;
- start: inferred, the attempt's first event (node 0's `up`, the job command's first step):
  Azure ML's job resource has no start time. Time from created to start is shown as queued, and
  the image pull before the command is in it."""

import os
import tempfile
from datetime import datetime
from fractions import Fraction
from pathlib import Path

from azdl import ledger
from azdl.errors import AzdlError
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


def events_prefix(job, outputs) -> str:
    """Where the job's events are in the outputs container: its `logs` output's folder (an
    `azureml://datastores/<datastore>/paths/<folder>/` URI, azdl.jobs.azureml.datastore_uri),
    then `events/` (azdl.jobs.spec.EVENTS)."""
    logs = (job.outputs or {}).get("logs")
    uri = getattr(logs, "path", None) or ""
    datastore, _, folder = uri.removeprefix("azureml://datastores/").partition("/paths/")
    if datastore != outputs.outputs_datastore or not folder:
        raise AzdlError(
            f"{job.name}: its `logs` output is {uri or 'missing'}; expected a folder of the "
            f"stack's outputs datastore ({outputs.outputs_datastore}), as azdl submit makes it"
        )
    return f"{folder.rstrip('/')}/events/"


def job_events(job, outputs) -> list[dict]:
    """The job's events, read from the outputs container, where its `logs` mount writes them:
    a running job's too, which azure-ai-ml's JobOperations.download refuses (only a job in
    RunHistoryConstants.TERMINAL_STATUSES: azure/ai/ml/operations/_job_operations.py,
    azure-ai-ml 1.35.2). Entra ID for the stack's account (azdl.staging.container_client)."""
    from azdl.staging import CONNECTION_STRING_ENV, container_client

    prefix = events_prefix(job, outputs)
    container = container_client(
        outputs.outputs_container_name, outputs.outputs_account_url,
        os.environ.get(CONNECTION_STRING_ENV),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="azdl-events-") as tmp:
        for blob in container.list_blobs(name_starts_with=prefix):
            local = Path(tmp, blob.name.removeprefix(prefix))
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(container.download_blob(blob.name).readall())
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


def chain_events(jobs: list, outputs) -> list[dict]:
    """The events of `jobs`, a job and its retries, in time order."""
    found = [e for job in jobs for e in job_events(job, outputs)]
    return sorted(found, key=lambda e: e["t_ms"])


def chain_ledger(
    jobs: list, outputs, now: datetime, found: list[dict] | None = None
) -> tuple[ledger.Ledger, int, Fraction]:
    """(the ledger of `jobs`, a job and its retries in order, GPUs per node, USD per node-hour),
    from `found`, their events (chain_events), read here when not given."""
    found = chain_events(jobs, outputs) if found is None else found
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
