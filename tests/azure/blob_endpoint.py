"""A local endpoint that answers as Azure Blob Storage does ("Blob service error codes",
x-ms-error-code, https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes),
for azure-ai-ml's own code upload: first 403 with an error code, then 404 BlobNotFound for a blob
not yet uploaded, 201 for Put Blob and 200 for Set Blob Metadata."""

import http.server
import threading
from typing import ClassVar

import pytest

MODIFIED = "Tue, 24 Nov 2026 19:00:00 GMT"


class BlobEndpoint(http.server.BaseHTTPRequestHandler):
    """A container that refuses the first `refusals` requests with `code`, then stores blobs."""

    code = "AuthorizationPermissionMismatch"
    refusals = 1
    blobs: ClassVar[dict[str, bytes]] = {}

    def _headers(self, status: int, code: str | None = None) -> None:
        self.send_response(status)
        if code:
            self.send_header("x-ms-error-code", code)
        self.send_header("x-ms-version", "2025-01-05")
        self.send_header("ETag", '"0x1"')
        self.send_header("Last-Modified", MODIFIED)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _refused(self) -> bool:
        if type(self).refusals:
            type(self).refusals -= 1
            self._headers(403, type(self).code)
            return True
        return False

    def do_HEAD(self):  # Get Blob Properties
        if not self._refused():
            known = self.path.split("?", 1)[0] in type(self).blobs
            self._headers(200 if known else 404, None if known else "BlobNotFound")

    def do_PUT(self):  # Put Blob, Set Blob Metadata
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self._refused():
            return
        path, _, query = self.path.partition("?")
        if "comp=metadata" in query:
            self._headers(200)
        else:
            type(self).blobs[path] = body
            self._headers(201)

    def log_message(self, *args):
        pass


@pytest.fixture
def blob_endpoint():
    """The endpoint's account URL (http://127.0.0.1:<port>/acct), refusing its first request
    with AuthorizationPermissionMismatch; BlobEndpoint's class fields set what it does."""
    BlobEndpoint.refusals, BlobEndpoint.blobs = 1, {}
    BlobEndpoint.code = "AuthorizationPermissionMismatch"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BlobEndpoint)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/acct"
    server.shutdown()
