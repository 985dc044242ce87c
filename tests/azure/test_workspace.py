"""The workspace side of jobs (azdl.jobs.workspace) against azure-ai-ml: the client is made for
the workspace the stack outputs name, and waiting ends at exactly azure-ai-ml's own terminal
statuses, or at its limit."""

from types import SimpleNamespace

import pytest

from azdl.jobs import workspace
from azdl.jobs.workspace import TERMINAL, WaitTimeout, wait


def test_the_client_is_made_for_the_workspace_the_stack_outputs_name(ml_client, outputs):
    client = workspace.ml_client(outputs())
    assert client is ml_client.return_value
    kwargs = ml_client.call_args.kwargs
    assert (kwargs["subscription_id"], kwargs["resource_group_name"], kwargs["workspace_name"]) == (
        "sub-1",
        "azdlprod-rg",
        "azdlprod-mlw",
    )


def test_wait_stops_at_every_terminal_status_of_azure_ai_ml():
    from azure.ai.ml.operations._run_history_constants import RunHistoryConstants

    assert set(TERMINAL) == set(RunHistoryConstants.TERMINAL_STATUSES)
    for final in TERMINAL:
        seen = iter(["Queued", "Running", final])
        client = SimpleNamespace(
            jobs=SimpleNamespace(get=lambda name, seen=seen: SimpleNamespace(status=next(seen)))
        )
        assert wait(client, "job-1", 0, sleep=lambda s: None) == final


def test_wait_gives_up_after_its_limit_with_a_clear_error():
    now = [0.0]
    client = SimpleNamespace(
        jobs=SimpleNamespace(get=lambda name: SimpleNamespace(status="Queued"))
    )

    def sleep(seconds):
        now[0] += seconds

    with pytest.raises(
        WaitTimeout, match=r"job job-1 is still Queued after the wait's limit of 90 s"
    ):
        wait(client, "job-1", 30, timeout_seconds=90, sleep=sleep, clock=lambda: now[0])
    assert now[0] == 90
