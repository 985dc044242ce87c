"""The fixtures these tests share with their neighbours, from their one home each: stack
outputs and the mocked MLClient (tests/jobs), a staged dataset (tests/data)."""

from tests.data.conftest import make_dataset  # noqa: F401  (fixtures: registered by import)
from tests.jobs.conftest import ml_client, outputs, outputs_file  # noqa: F401
