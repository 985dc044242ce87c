"""The fixtures these tests share with their neighbours, from their one home each: stack
outputs and the mocked MLClient (tests/support/job_fixtures.py), a staged dataset
(tests/support/datasets.py); the local storage endpoint azure-ai-ml's code upload meets
(blob_endpoint.py), the one that refuses while roles propagate (refusing_endpoint.py), and the
local stand-in for the workspace's control plane that a real MLClient talks to
(control_plane.py)."""

from tests.azure.blob_endpoint import blob_endpoint  # noqa: F401
from tests.azure.control_plane import control_plane  # noqa: F401
from tests.azure.outputs_storage import outputs_azurite, outputs_storage  # noqa: F401
from tests.azure.refusing_endpoint import container  # noqa: F401
from tests.support.datasets import make_dataset  # noqa: F401  (fixtures: registered by import)
from tests.support.job_fixtures import ml_client, outputs, outputs_file  # noqa: F401
