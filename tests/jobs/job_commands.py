"""Helpers for tests that read a job's command line (imported by name: conftest.py files of
several test folders share the module name `conftest`)."""

import re
import shlex

from azdl.runtime import module_command


def runs(module: str) -> str:
    """The shell words with which a job's command starts azdl's `module`, off the working
    directory (azdl.runtime; what they do is tested by running them in a shadowing folder:
    tests/training/test_own_script.py)."""
    return shlex.join(module_command(module))


def unguarded(command: str) -> str:
    """A job's command without its events step (`after_events`) and the training.guard prefix
    of its training step (tested in tests/jobs/test_safeguards.py), to compare the steps
    themselves."""
    return re.sub(re.escape(runs("training.guard")) + r" .*? -- ", "", after_events(command))


def after_events(command: str) -> str:
    """A job's command after its first step, the events' folder and node 0's `up` event
    (azdl.jobs.spec.events_step; run in tests/jobs/fault_matrix/test_ledger_kill.py)."""
    from azdl.jobs.spec import events_step

    first = f"{events_step()} && "
    assert command.startswith(first), command[:200]
    return command.removeprefix(first)
