"""The Azure side of jobs: the workspace client, submission, waiting, and a job's logs.

Authentication is azure-identity's DefaultAzureCredential (az login, a managed identity, or
environment credentials), probed before the client is made; nothing here holds a key.
"""

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from azdl import credentials
from azdl.errors import AzdlError
from azdl.jobs.stack_outputs import StackOutputs

CONNECT_TIMEOUT_S = 10
# The statuses after which a job does not move on by itself: azure-ai-ml's own terminal set
# (RunHistoryConstants.TERMINAL_STATUSES; tests/azure checks the two agree).
TERMINAL = ("Completed", "Failed", "Canceled", "NotResponding", "Paused")


class WaitTimeout(AzdlError):
    """The job was still not in a terminal status when the wait's time ran out."""


def ml_client(outputs: StackOutputs):
    """An MLClient for the stack's workspace, once the sign-in is known to work
    (`azdl.credentials`)."""
    from azure.ai.ml import MLClient

    return MLClient(
        credentials.credential(credentials.ARM_SCOPE),
        subscription_id=outputs["subscriptionId"],
        resource_group_name=outputs["resourceGroupName"],
        workspace_name=outputs["workspaceName"],
        # azure-core's defaults wait 300 s per connection attempt and retry a connection 3
        # times: an endpoint that does not answer would hold a command for 20 minutes.
        connection_timeout=CONNECT_TIMEOUT_S,
        retry_connect=1,
    )


def wait(
    client,
    name: str,
    poll_seconds: float = 30.0,
    on_status: Callable[[str], None] = lambda status: None,
    timeout_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Poll the job until it reaches a terminal status and return that status; raise
    WaitTimeout if it has not after `timeout_seconds` (None: no limit; checked once per poll)."""
    deadline = None if timeout_seconds is None else clock() + timeout_seconds
    while True:
        status = client.jobs.get(name).status
        on_status(status)
        if status in TERMINAL:
            return status
        if deadline is not None and clock() >= deadline:
            raise WaitTimeout(
                f"job {name} is still {status} after the wait's limit of {timeout_seconds:g} s "
                f"(waiting for one of {', '.join(TERMINAL)})"
            )
        sleep(poll_seconds)


def job_logs(client, name: str) -> str:
    """The text of every log file of the job (all ranks' stdout/stderr, system logs).

    Only the job's default artifacts (its logs) are downloaded, not its named outputs such as
    checkpoints."""
    with tempfile.TemporaryDirectory(prefix="azdl-logs-") as tmp:
        client.jobs.download(name, download_path=tmp)
        files = sorted(p for p in Path(tmp).rglob("*") if p.suffix in (".txt", ".log"))
        return "\n".join(p.read_text(errors="replace") for p in files)
