"""The fixtures these tests share with their neighbours, from their one home each: stack
outputs and the mocked MLClient (tests/jobs), a staged dataset (tests/data); the local storage
endpoint azure-ai-ml's code upload meets (blob_endpoint.py) and the local stand-in for the
workspace's control plane that a real MLClient talks to (control_plane.py)."""

from tests.azure.blob_endpoint import blob_endpoint  # noqa: F401
from tests.azure.control_plane import control_plane  # noqa: F401
from tests.data.conftest import make_dataset  # noqa: F401  (fixtures: registered by import)
from tests.jobs.conftest import ml_client, outputs, outputs_file  # noqa: F401
