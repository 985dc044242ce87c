"""The shipped stacks as fixtures, each rendered once per session (tests.support.renderings)."""

from pathlib import Path

import pytest

from infra.config import load_stack_file
from infra.naming import with_deployment
from tests.shipped import STACK_FILES
from tests.support.mock_engine import RANDOM_ID, SUBSCRIPTION_ID
from tests.support.renderings import rendered


@pytest.fixture(scope="session", params=STACK_FILES, ids=lambda p: p.name)
def stack_file(request) -> Path:
    return request.param


@pytest.fixture(scope="session")
def rendering(stack_file):
    return rendered(stack_file)


@pytest.fixture(scope="session")
def cfg(stack_file):
    """The stack's config for the subscription the mocks answer, its names as deployed: the
    soft-deleted ones end in the deployment id the rendering drew (infra/naming.py)."""
    config = load_stack_file(stack_file, SUBSCRIPTION_ID)
    (deployment,) = rendered(stack_file).of_type(RANDOM_ID)
    deployed = config.model_copy()
    deployed._names = with_deployment(config.names, deployment.state["hex"])
    return deployed
