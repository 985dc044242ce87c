"""A local endpoint that answers as Azure Blob Storage does while role assignments propagate:
403 with the `x-ms-error-code` header ("Blob service error codes",
https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes), then 200; read
by azure-storage-blob's own client, so the errors are the SDK's, not hand-made. For the
propagation tests and the troubleshooting page's quotes."""

import http.server
import threading

import pytest
from azure.storage.blob import ContainerClient

from azdl.propagation import while_propagating


class Refusing(http.server.BaseHTTPRequestHandler):
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
    Refusing.seen = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/acct"
    # an account that needs no credential for this endpoint; retries off so every
    # request is one the test counts
    yield ContainerClient(url, "data", retry_total=0)
    server.shutdown()


def retry(container, clock, say=lambda _line: None):
    return while_propagating(container.get_container_properties, "reading data",
                             say=say, sleep=clock.sleep, clock=lambda: clock.now)  # fmt: skip
