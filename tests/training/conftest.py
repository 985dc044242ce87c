"""The training tests' marker: they run in the training environment. What they share is in
worker_runs.py beside it (a conftest is pytest's to load, never a library)."""

import pytest


def pytest_collection_modifyitems(items):
    """Everything under tests/training runs in the training environment."""
    for item in items:
        if "tests/training/" in str(item.path):
            item.add_marker(pytest.mark.training_env)
