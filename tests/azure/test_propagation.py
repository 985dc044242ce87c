"""A 403 right after `pulumi up`: azdl says that role assignments may still be propagating and
retries for a bounded time. The refusals come from a local endpoint that answers as Azure Blob
Storage does (status 403 and the `x-ms-error-code` header, "Blob service error codes",
https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes), read by
azure-storage-blob's own client, so the errors are the SDK's, not hand-made."""

import pytest
from azure.core.exceptions import HttpResponseError

from azdl.errors import AzdlError
from azdl.propagation import PROPAGATION_SECONDS
from azdl.staging import check_access
from tests.azure.fake_clock import Clock
from tests.azure.refusing_endpoint import Refusing, retry


def test_a_403_while_roles_propagate_is_retried_with_a_note(container):
    clock, said = Clock(), []
    props = retry(container, clock, said.append)
    assert props.etag == '"0x1"'
    assert Refusing.seen == 3 and clock.sleeps == [20, 20]
    [note] = said  # said once, not on every retry
    assert "AuthorizationPermissionMismatch" in note
    assert "can take up to 10 minutes to take effect" in note


def test_the_wait_is_bounded_and_then_names_the_missing_role(container):
    Refusing.refusals = 10**6
    clock = Clock()
    try:
        with pytest.raises(AzdlError, match=r"still refuses access \(AuthorizationPermission"
                           r"Mismatch, HTTP 403\) after \d+ s.*lacks the role"):  # fmt: skip
            retry(container, clock)
    finally:
        Refusing.refusals = 2
    assert clock.now <= PROPAGATION_SECONDS
    assert Refusing.seen == len(clock.sleeps) + 1 > 20


def test_refusals_no_wait_fixes_fail_at_once(container):
    """Network rules that do not admit this machine (AuthorizationFailure) are not a role
    still propagating: no retry, the caller's own message."""
    Refusing.code = "AuthorizationFailure"
    clock = Clock()
    try:
        with pytest.raises(HttpResponseError):
            retry(container, clock)
        Refusing.seen = 0
        with pytest.raises(AzdlError, match="network rules do not admit this machine"):
            check_access(container)
    finally:
        Refusing.code = "AuthorizationPermissionMismatch"
    assert clock.sleeps == [] and Refusing.seen == 1


def test_data_stage_checks_access_through_the_retry(container, monkeypatch):
    slept = []
    monkeypatch.setattr("azdl.propagation.time.sleep", slept.append)
    check_access(container)  # two refusals, then the container: no error
    assert Refusing.seen == 3 and len(slept) == 2
