"""The stack's outputs container on Azurite, where a job's `logs` mount writes its events
(training.events, under `<experiment>/<job>/logs/events/`, azdl.jobs.spec.EVENTS), as
`azdl jobs ledger|report|watch` read them; and the rule azure-ai-ml's JobOperations.download
keeps, for the tests' mocked MLClient: only a job in a terminal status is downloaded
(RunHistoryConstants.TERMINAL_STATUSES, azure/ai/ml/operations/_job_operations.py, 1.35.2)."""

import json
from collections.abc import Iterable

import pytest
from azure.storage.blob import BlobServiceClient

from azdl.azurite import running_azurite
from azdl.jobs.workspace import TERMINAL
from azdl.staging import CONNECTION_STRING_ENV

CONTAINER = "outputs"  # stack_outputs()'s outputsContainerName


@pytest.fixture(scope="session")
def outputs_azurite():
    with running_azurite() as emulator:
        yield emulator


class OutputsStorage:
    """The outputs container, empty at the start of each test."""

    def __init__(self, container):
        self.container = container

    def put_events(self, job: str, found: Iterable[dict], experiment: str = "azdl") -> None:
        """Write `found`, one job's events, as each process's file (overwriting what was)."""
        processes: dict[tuple[int, str], list[dict]] = {}
        for event in found:
            processes.setdefault((event["round"], event["process"]), []).append(event)
        for (round_, process), mine in processes.items():
            name = f"{experiment}/{job}/logs/events/events-{job}-round-{round_}-{process}.jsonl"
            text = "".join(json.dumps(e) + "\n" for e in mine)
            self.container.upload_blob(name, text.encode(), overwrite=True)


@pytest.fixture
def outputs_storage(outputs_azurite, monkeypatch) -> OutputsStorage:
    """The emulator as the stack's outputs account (azdl.staging's emulator connection string)."""
    connection = outputs_azurite.connection_string()
    monkeypatch.setenv(CONNECTION_STRING_ENV, connection)
    container = BlobServiceClient.from_connection_string(connection).get_container_client(CONTAINER)
    if container.exists():
        for blob in container.list_blobs():
            container.delete_blob(blob.name)
    else:
        container.create_container()
    return OutputsStorage(container)


def refuse_unless_ended(job) -> None:
    """What JobOperations.download does first: a job that has not ended is refused."""
    from azure.ai.ml.exceptions import JobException

    status = getattr(job.status, "value", job.status)
    if status not in TERMINAL:
        raise JobException(
            message=f"This job is in state {status}. Download is allowed only in states "
            f"{list(TERMINAL)}", no_personal_data_message="job not terminal",
        )  # fmt: skip
