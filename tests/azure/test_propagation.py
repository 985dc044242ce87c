"""A 403 right after `pulumi up`: azdl says that role assignments may still be propagating and
retries for a bounded time. The refusals come from a local endpoint that answers as Azure Blob
Storage does (status 403 and the `x-ms-error-code` header, "Blob service error codes",
https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes), read by
azure-storage-blob's own client, so the errors are the SDK's, not hand-made."""

import http.server
import threading

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient

from azdl.errors import AzdlError
from azdl.propagation import PROPAGATION_SECONDS, while_propagating
from azdl.staging import check_access
from tests.azure.fake_clock import Clock


class _Refusing(http.server.BaseHTTPRequestHandler):
    """Refuses the first `refusals` requests with `code`, then answers as a container."""

    code = "AuthorizationPermissionMismatch"
    refusals = 2
    seen = 0

    def do_GET(self):
        type(self).seen += 1
        if type(self).seen <= type(self).refusals:
            self.send_response(403)
            self.send_header("x-ms-error-code", type(self).code)
        else:
            self.send_response(200)
            self.send_header("ETag", '"0x1"')
            self.send_header("Last-Modified", "Tue, 24 Nov 2026 19:00:00 GMT")
        self.send_header("x-ms-version", "2025-01-05")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def container():
    _Refusing.seen = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/acct"
    # an account that needs no credential for this endpoint; retries off so every
    # request is one the test counts
    yield ContainerClient(url, "data", retry_total=0)
    server.shutdown()


def retry(container, clock, say=lambda _line: None):
    return while_propagating(container.get_container_properties, "reading data",
                             say=say, sleep=clock.sleep, clock=lambda: clock.now)  # fmt: skip


def test_a_403_while_roles_propagate_is_retried_with_a_note(container):
    clock, said = Clock(), []
    props = retry(container, clock, said.append)
    assert props.etag == '"0x1"'
    assert _Refusing.seen == 3 and clock.sleeps == [20, 20]
    [note] = said  # said once, not on every retry
    assert "AuthorizationPermissionMismatch" in note
    assert "can take up to 10 minutes to take effect" in note


def test_the_wait_is_bounded_and_then_names_the_missing_role(container):
    _Refusing.refusals = 10**6
    clock = Clock()
    try:
        with pytest.raises(AzdlError, match=r"still refuses access \(AuthorizationPermission"
                           r"Mismatch, HTTP 403\) after \d+ s.*lacks the role"):  # fmt: skip
            retry(container, clock)
    finally:
        _Refusing.refusals = 2
    assert clock.now <= PROPAGATION_SECONDS
    assert _Refusing.seen == len(clock.sleeps) + 1 > 20


def test_refusals_no_wait_fixes_fail_at_once(container):
    """Network rules that do not admit this machine (AuthorizationFailure) are not a role
    still propagating: no retry, the caller's own message."""
    _Refusing.code = "AuthorizationFailure"
    clock = Clock()
    try:
        with pytest.raises(HttpResponseError):
            retry(container, clock)
        _Refusing.seen = 0
        with pytest.raises(AzdlError, match="network rules do not admit this machine"):
            check_access(container)
    finally:
        _Refusing.code = "AuthorizationPermissionMismatch"
    assert clock.sleeps == [] and _Refusing.seen == 1


def test_data_stage_checks_access_through_the_retry(container, monkeypatch):
    slept = []
    monkeypatch.setattr("azdl.propagation.time.sleep", slept.append)
    check_access(container)  # two refusals, then the container: no error
    assert _Refusing.seen == 3 and len(slept) == 2
