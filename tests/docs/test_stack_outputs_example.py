"""docs/stack-outputs.example.json is what its generator writes today (tests/support/
example_outputs.py): the dev stack's outputs from the program under the test engine's mocks."""

import json

import pytest

from tests.support import example_outputs

pytestmark = pytest.mark.slow  # renders the dev stack


def test_the_example_outputs_are_the_programs_under_mocks():
    committed = example_outputs.PATH.read_text()
    assert json.loads(committed) == example_outputs.example(), (
        "docs/stack-outputs.example.json differs from the program's outputs under mocks: run "
        "`python -m tests.support.example_outputs`, then regenerate the docs' --dry-run blocks"
    )
    assert committed == example_outputs.text()  # and it is the generator's exact text
