"""The first `azdl submit --script` right after `pulumi up`: azure-ai-ml uploads the code folder
to the workspace's storage, and a role assignment still taking effect refuses it with 403
AuthorizationPermissionMismatch. azure-ai-ml 1.35.2 raises that, inside
`MLClient.jobs.create_or_update`, as an `MlException` with the 403 two links down its chain
(azdl/propagation.py, `code_upload_refusals`); the propagation retry judges the 403.

Everything runs as the user's call does: azure-ai-ml's own MLClient and azure-storage-blob,
against a local stand-in for the workspace's control plane (tests/azure/control_plane.py,
answers shaped as azure-rest-api-specs' examples) and a local blob endpoint that answers as Azure
Blob Storage does (tests/azure/blob_endpoint.py): first 403 AuthorizationPermissionMismatch, then
as a container that stores the blobs."""

from types import SimpleNamespace

import pytest
from azure.ai.ml.exceptions import MlException, ValidationException
from azure.core.exceptions import HttpResponseError

from azdl.cli import main
from azdl.errors import AzdlError
from azdl.jobs.stack_outputs import parse_outputs
from azdl.jobs.workspace import ml_client
from azdl.propagation import code_upload_refusals, while_propagating
from tests.azure.blob_endpoint import BlobEndpoint
from tests.azure.fake_clock import Clock
from tests.support.job_fixtures import stack_outputs

OUTPUTS = parse_outputs(stack_outputs(), "test outputs")


@pytest.fixture
def script(tmp_path, monkeypatch):
    """A user's training script in its own folder (the job's code), run from outside any git
    checkout (azure-ai-ml adds the current folder's git state to the job)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project").mkdir()
    path = tmp_path / "project" / "train.py"
    path.write_text("import torch\nprint('training')\n")
    return path


@pytest.fixture
def clock(mocker):
    """Time in azdl.propagation passes only when it sleeps."""
    fake = Clock()
    now = SimpleNamespace(sleep=fake.sleep, monotonic=lambda: fake.now)
    mocker.patch("azdl.propagation.time", now)
    return fake


def submit(outputs_file, script) -> int:
    return main(["submit", "--outputs", str(outputs_file()), "--script", str(script),
                 "--nodes", "1", "--name", "r1", "--storage", "synthetic",
                 "--no-health-check"])  # fmt: skip


def uploaded(control_plane) -> list[str]:
    """The code uploads begun: each asks the workspace where to upload."""
    return [line for line in control_plane.requests if "/startPendingUpload" in line]


def job_for(script):
    """The job `azdl submit --script` sends, with the script's folder as its code."""
    from azdl.jobs.azureml import command_job

    return command_job(OUTPUTS, "r1", "azdl", command="python train.py", code=str(script.parent),
                       environment=OUTPUTS.environment("torch"))  # fmt: skip


def retried(client, job, clock, **window):
    """`client.jobs.create_or_update(job)` under the propagation retry, as azdl.jobs.submit
    calls it."""
    return while_propagating(lambda: client.jobs.create_or_update(job), "submitting r1",
                             wrapped=code_upload_refusals(), sleep=clock.sleep,
                             clock=lambda: clock.now, **window)  # fmt: skip


def test_azure_ai_ml_raises_the_refused_upload_with_the_403_in_its_context(control_plane, script):
    """What the retry has to see through: azure-ai-ml 1.35.2's own chain, not a stand-in's."""
    with pytest.raises(MlException) as refused:
        ml_client(OUTPUTS).jobs.create_or_update(job_for(script))
    assert refused.value.__cause__ is None
    assert isinstance(refused.value.__context__, ValidationException)
    behind = refused.value.__context__.__cause__
    assert isinstance(behind, HttpResponseError)
    assert (behind.status_code, behind.error_code) == (403, "AuthorizationPermissionMismatch")


def test_the_first_submit_after_up_waits_out_the_role(control_plane, outputs_file, script, clock,
                                                      capsys):  # fmt: skip
    assert submit(outputs_file, script) == 0
    captured = capsys.readouterr()
    assert "submitted r1" in captured.out
    assert captured.err.count("Azure answered 403 (AuthorizationPermissionMismatch)") == 1
    assert "can take up to 10 minutes to take effect" in captured.err
    assert clock.sleeps == [20]
    assert len(uploaded(control_plane)) == 2  # refused once, then let in
    assert [path.rsplit("/", 2)[-2:] for path in BlobEndpoint.blobs] == [["project", "train.py"]]
    [job] = [line for line in control_plane.requests if line.startswith("PUT") and "/jobs/" in line]
    assert job.endswith("/jobs/r1")


def test_the_wait_is_bounded_and_names_the_role(control_plane, script, clock):
    """A shorter window than the real 10 minutes (test_propagation.py checks that one)."""
    BlobEndpoint.refusals = 10**6
    with pytest.raises(AzdlError) as refused:
        retried(ml_client(OUTPUTS), job_for(script), clock, window_seconds=60)
    assert str(refused.value).startswith(
        "submitting r1: Azure still refuses access (AuthorizationPermissionMismatch, HTTP 403) "
        "after 60 s"
    )
    assert "lacks the role" in str(refused.value)
    assert len(uploaded(control_plane)) == 4  # at 0, 20, 40 and 60 s, then no more
    assert not any("/jobs/" in line for line in control_plane.requests)


def test_a_refusal_no_wait_fixes_is_not_retried(control_plane, script, clock):
    """AuthorizationFailure: the storage firewall refuses this machine (not a role); azure-ai-ml
    lets the storage error through unwrapped."""
    BlobEndpoint.code = "AuthorizationFailure"
    with pytest.raises(HttpResponseError) as raised:
        retried(ml_client(OUTPUTS), job_for(script), clock)
    assert raised.value.error_code == "AuthorizationFailure"
    assert clock.sleeps == []
