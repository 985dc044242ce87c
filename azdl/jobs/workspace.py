"""The Azure side of jobs: the workspace client, submission, waiting, and a job's logs.

Authentication is azure-identity's DefaultAzureCredential (az login, a managed identity, or
environment credentials); nothing here holds a key.
"""

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from azdl.jobs.stack_outputs import StackOutputs

TERMINAL = ("Completed", "Failed", "Canceled", "NotResponding")


def ml_client(outputs: StackOutputs):
    """An MLClient for the stack's workspace."""
    from azure.ai.ml import MLClient
    from azure.identity import DefaultAzureCredential

    return MLClient(
        DefaultAzureCredential(),
        subscription_id=outputs["subscriptionId"],
        resource_group_name=outputs["resourceGroupName"],
        workspace_name=outputs["workspaceName"],
    )


def wait(
    client,
    name: str,
    poll_seconds: float = 30.0,
    on_status: Callable[[str], None] = lambda status: None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll the job until it reaches a terminal status; return that status."""
    while True:
        status = client.jobs.get(name).status
        on_status(status)
        if status in TERMINAL:
            return status
        sleep(poll_seconds)


def job_logs(client, name: str) -> str:
    """The text of every log file of the job (all ranks' stdout/stderr, system logs).

    Only the job's default artifacts (its logs) are downloaded, not its named outputs such as
    checkpoints."""
    with tempfile.TemporaryDirectory(prefix="azdl-logs-") as tmp:
        client.jobs.download(name, download_path=tmp)
        files = sorted(p for p in Path(tmp).rglob("*") if p.suffix in (".txt", ".log"))
        return "\n".join(p.read_text(errors="replace") for p in files)
