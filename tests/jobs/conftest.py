"""The shared job fixtures (tests/support/job_fixtures.py): stack outputs and the mocked
MLClient."""

from tests.support.job_fixtures import ml_client, outputs, outputs_file  # noqa: F401
