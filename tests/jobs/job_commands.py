"""Helpers for tests that read a job's command line (imported by name: conftest.py files of
several test folders share the module name `conftest`)."""

import re


def unguarded(command: str) -> str:
    """A job's command without the training.guard prefix of its training step (tested in
    tests/jobs/test_safeguards.py), to compare the steps themselves."""
    return re.sub(r"python -m training\.guard .*? -- ", "", command)
