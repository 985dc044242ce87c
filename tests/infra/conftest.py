"""Render each stack file once per test session (the program under the SDK's mocks)."""

from pathlib import Path

import pytest

from infra.mocks import render_stack_file

STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"
STACK_FILES = sorted(STACKS_DIR.glob("Pulumi.*.yaml"))


@pytest.fixture(scope="session", params=STACK_FILES, ids=lambda p: p.name)
def rendering(request):
    return render_stack_file(request.param)
