"""The fixtures these tests share with their neighbours, from their one home each: stack
outputs and the mocked MLClient (tests/jobs), a staged dataset (tests/data); and the local
storage endpoint azure-ai-ml's code upload meets (blob_endpoint.py)."""

from tests.azure.blob_endpoint import upload  # noqa: F401
from tests.data.conftest import make_dataset  # noqa: F401  (fixtures: registered by import)
from tests.jobs.conftest import ml_client, outputs, outputs_file  # noqa: F401
