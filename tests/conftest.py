"""The shipped stacks, rendered once per session for tests/review and tests/docs: dev through
the `azdl plan` command, prod through the function it calls (each in its own subprocess).

A test that uses a rendering fixture (RENDERING, directly or through another fixture) is marked
slow: rendering the program takes seconds, and `make test-fast` leaves slow tests out. A test
that renders by itself carries the mark in its module; one that renders without it fails
(tests/support/slow_renders.py).

Imports stay inside the fixtures: the training tests (.venv-train) load this file too."""

import json

import pytest

pytest_plugins = ["tests.support.slow_renders"]

# The fixtures that render the program (by name, wherever they are defined).
RENDERING = {
    "cli_plan_output", "shipped_plans", "rendering", "cfg",  # the shipped stacks
    "built", "prebuilt", "variant", "prod_with_jump_host", "landing_zone", "policy_dns", "plans",
}  # fmt: skip


def pytest_collection_modifyitems(items):
    for item in items:
        if RENDERING & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def cli_plan_output(tmp_path_factory) -> tuple[dict, str, str]:
    """(manifest written by `azdl plan dev`, its exact text, what the command printed)."""
    import contextlib
    import io

    from azdl.cli import main

    out = tmp_path_factory.mktemp("plan")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["plan", "dev", "--out", str(out), "--images-per-sec", "2000"]) == 0
    text = (out / "dev.json").read_text()
    return json.loads(text), text, printed.getvalue()


@pytest.fixture(scope="session")
def shipped_plans(cli_plan_output) -> dict[str, dict]:
    from azdl.review.plan import render_stack

    return {"dev": cli_plan_output[0], "prod": render_stack("prod")[0]}
