"""The first `azdl submit --script` right after `pulumi up`: azure-ai-ml uploads the code folder
to the workspace's storage with the operator's identity, and a role assignment still taking
effect refuses it with 403 AuthorizationPermissionMismatch. azure-ai-ml 1.35.2 turns that into a
ValidationException (azure/ai/ml/_artifacts/_blob_storage_helper.py,
BlobStorageClient.check_blob_exists); the propagation retry judges the 403 behind it.

The upload runs through azure-ai-ml's own BlobStorageClient against a local endpoint that
answers as Azure Blob Storage does (tests/azure/blob_endpoint.py, the `upload` fixture): first
403 AuthorizationPermissionMismatch, then as a container that stores the blobs."""

import pytest
from azure.ai.ml.exceptions import ValidationException
from azure.core.exceptions import HttpResponseError

from azdl.errors import AzdlError
from azdl.propagation import code_upload_refusals, while_propagating
from tests.azure.blob_endpoint import BlobEndpoint
from tests.azure.fake_clock import Clock


def retried(call, clock, say=lambda _line: None):
    return while_propagating(call, "submitting r1", wrapped=code_upload_refusals(),
                             say=say, sleep=clock.sleep, clock=lambda: clock.now)  # fmt: skip


def test_azure_ml_wraps_the_refused_upload_in_a_validation_exception(upload):
    """What the retry has to see through (azure-ai-ml 1.35.2's own code, not a stand-in)."""
    run, _ = upload
    with pytest.raises(ValidationException) as refused:
        run()
    assert refused.value.__cause__.status_code == 403
    assert refused.value.__cause__.error_code == "AuthorizationPermissionMismatch"


def test_a_refused_code_upload_is_retried_until_the_role_takes_effect(upload):
    run, stored = upload
    clock, said = Clock(), []
    info = retried(run, clock, said.append)
    assert clock.sleeps == [20]
    [note] = said
    assert "AuthorizationPermissionMismatch" in note and "10 minutes" in note
    assert [path.rsplit("/", 2)[-2:] for path in stored] == [["code", "train.py"]]
    assert info["name"] == "code"


def test_the_wait_is_bounded_and_names_the_role(upload):
    run, _ = upload
    BlobEndpoint.refusals = 10**6
    refused = r"AuthorizationPermissionMismatch, HTTP 403.*lacks the role"
    with pytest.raises(AzdlError, match=refused):
        retried(run, Clock())


def test_a_refusal_no_wait_fixes_is_not_retried(upload):
    """AuthorizationFailure: the storage firewall refuses this machine (not a role)."""
    run, _ = upload
    BlobEndpoint.code = "AuthorizationFailure"
    clock = Clock()
    with pytest.raises(HttpResponseError) as raised:  # azure-ai-ml wraps only the mismatch
        retried(run, clock)
    assert raised.value.error_code == "AuthorizationFailure"
    assert clock.sleeps == []
