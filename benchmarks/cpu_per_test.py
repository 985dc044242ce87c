"""A pytest plugin for benchmarks/test_time.py: the CPU time each test took, its own process's
and that of the processes it started and waited for (getrusage: RUSAGE_SELF + RUSAGE_CHILDREN,
from its setup to its teardown), as one JSON line per test in $AZDL_TEST_CPU_DIR/<pid>.jsonl.
A process that a test leaves running, or that nobody waits for, is not counted."""

import json
import os
import resource
from pathlib import Path

import pytest

DIR_ENV = "AZDL_TEST_CPU_DIR"


def _cpu_s() -> float:
    usages = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    started = _cpu_s()
    yield
    line = json.dumps({"test": item.nodeid, "cpu_s": round(_cpu_s() - started, 3)})
    with (Path(os.environ[DIR_ENV]) / f"{os.getpid()}.jsonl").open("a") as out:
        out.write(line + "\n")
