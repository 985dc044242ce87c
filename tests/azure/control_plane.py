"""A local stand-in for Azure ML's control plane (Azure Resource Manager) as azure-ai-ml 1.35.2's
own MLClient calls it for `azdl submit --script`: the quota reads, the code asset's upload
handshake and the job's PUT. The requests are the ones the real MLClient sends (its URLs, read off
its transport); each answer has the shape of azure-rest-api-specs' example for that operation
(machinelearningservices, cited per route). The code upload itself goes where the answer to
startPendingUpload points it: the local blob endpoint (blob_endpoint.py).

Only the control plane is stood in: MLClient, its operations and azure-storage-blob run as they
are. A request no route answers gets 501, so a test meets it as an error rather than a guess."""

import functools
import http.server
import json
import re
import threading
import time
from typing import ClassVar

import pytest
from azure.core.credentials import AccessToken
from azure.core.pipeline.transport import RequestsTransport

from tests.azure.documented import DATA, h100_size, h100_usages

ARM = "https://management.azure.com"
_PROVIDER = r"providers/Microsoft\.MachineLearningServices"
_WORKSPACE = rf"/subscriptions/[^/]+/resourceGroups/[^/]+/{_PROVIDER}/workspaces/[^/]+"
_LOCATION = rf"/subscriptions/[^/]+/{_PROVIDER}/locations/[^/]+"
SYSTEM_DATA = {"createdAt": "2026-11-24T19:00:00Z", "createdBy": "operator@contoso.com",
               "createdByType": "User"}  # fmt: skip


def _resource(path: str, kind: str, body: dict) -> dict:
    """A created resource as ARM returns it: the PUT body with its id, name, type, systemData."""
    return {"id": path, "name": path.rsplit("/", 1)[-1], "type": kind, **body,
            "systemData": SYSTEM_DATA}  # fmt: skip


class ControlPlane(http.server.BaseHTTPRequestHandler):
    """Answers the workspace's REST calls; `blob_container` is the container URL the code upload
    is sent to, `requests` what was asked ("METHOD path")."""

    blob_container: ClassVar[str] = ""
    requests: ClassVar[list[str]] = []

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        size = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(size)) if size else None
        type(self).requests.append(f"{method} {path}")
        for verb, pattern, answer in ROUTES:
            if verb == method and re.fullmatch(pattern, path):
                return self._answer(*answer(path, body))
        message = f"the control-plane stand-in has no answer for {method} {path}"
        self._answer(501, {"error": {"code": "NotImplemented", "message": message}})

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def log_message(self, *args):
        pass


def _compute(path, _body):
    # Compute/get/AmlCompute.json (stable 2024-10-01, commit 11aef45): a dedicated cluster
    documented = json.loads((DATA / "compute_get_amlcompute.json").read_text())
    documented.pop("_source")
    documented["properties"]["properties"]["vmSize"] = h100_size()["name"]
    return 200, documented | {"id": path, "name": path.rsplit("/", 1)[-1]}


def _pending_upload(_path, body):
    # Workspace/CodeVersion/createOrGetStartPendingUpload.json (stable 2023-04-01, commit
    # 029741f): where to upload, with a SAS credential (here the local blob endpoint's
    # container; a placeholder signature, which the endpoint does not check)
    url = ControlPlane.blob_container
    credential = {"credentialType": "SAS", "sasUri": f"{url}?sv=2025-01-05&sig=local"}
    reference = {"blobUri": url, "storageAccountArmId": "local", "credential": credential}
    return 200, {"blobReferenceForConsumption": reference, "pendingUploadId": "upload-1",
                 "pendingUploadType": body["pendingUploadType"]}  # fmt: skip


def _code_version(path, body):
    # Workspace/CodeVersion/createOrUpdate.json (stable 2023-04-01, commit 965bc61): the code
    # version as sent
    return 201, _resource(path, "Microsoft.MachineLearningServices/workspaces/codes/versions", body)


def _job(path, body):
    # Job/CommandJob/createOrUpdate.json (stable 2024-10-01, commit 7e45b04): the job as sent,
    # NotStarted
    body["properties"]["status"] = "NotStarted"
    return 201, _resource(path, "Microsoft.MachineLearningServices/workspaces/jobs", body)


ROUTES = (
    ("GET", f"{_WORKSPACE}/computes/[^/]+", _compute),
    # VirtualMachineSize/list.json and Usage/list.json (tests/azure/data): the stack's H100
    # size, no cores in use
    ("GET", f"{_LOCATION}/vmSizes", lambda _p, _b: (200, {"value": [h100_size()]})),
    ("GET", f"{_LOCATION}/usages", lambda _p, _b: (200, {"value": h100_usages(used=0)})),
    # Compute/listNodes.json's shape (tests/azure/data/compute_list_nodes.json): no nodes yet
    ("POST", f"{_WORKSPACE}/computes/[^/]+/listNodes", lambda _p, _b: (200, {"nodes": []})),
    # Workspace/CodeVersion/list.json (stable 2023-04-01, commit 3b06a58), asked with the code's
    # hash: no code with that hash yet (the first submit of this folder)
    ("GET", f"{_WORKSPACE}/codes/[^/]+/versions", lambda _p, _b: (200, {"value": []})),
    ("POST", f"{_WORKSPACE}/codes/[^/]+/versions/[^/]+/startPendingUpload", _pending_upload),
    ("PUT", f"{_WORKSPACE}/codes/[^/]+/versions/[^/]+", _code_version),
    ("PUT", f"{_WORKSPACE}/jobs/[^/]+", _job),
)


class SignedIn:
    """A credential that has a token, as after `az login` (azure-core's TokenCredential
    protocol: `get_token` returns an AccessToken)."""

    def __init__(self, *args, **kwargs):
        pass

    def get_token(self, *scopes, **kwargs) -> AccessToken:
        return AccessToken("local", int(time.time()) + 3600)


class _ToLocal(RequestsTransport):
    """azure-core's own HTTP transport, sending Resource Manager's requests to the stand-in:
    after the pipeline's policies, whose bearer-token policy refuses a URL that is not https."""

    def __init__(self, local: str, **kwargs):
        super().__init__(**kwargs)
        self._local = local

    def send(self, request, **kwargs):
        if request.url.startswith(ARM):
            request.url = self._local + request.url[len(ARM) :]
        return super().send(request, **kwargs)


@pytest.fixture
def control_plane(mocker, blob_endpoint):
    """Every MLClient made during the test talks to the stand-in, signed in; returns
    ControlPlane (its `requests`). Code uploads go to `blob_endpoint`'s container."""
    from azure.ai.ml import MLClient

    ControlPlane.blob_container, ControlPlane.requests = f"{blob_endpoint}/upload-1", []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ControlPlane)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    local = f"http://127.0.0.1:{server.server_address[1]}"
    mocker.patch("azure.identity.DefaultAzureCredential", SignedIn)
    mocker.patch("azure.ai.ml.MLClient", functools.partial(MLClient, transport=_ToLocal(local)))
    yield ControlPlane
    server.shutdown()
