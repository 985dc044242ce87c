"""`slow` by construction (docs/testing.md): a test that renders the Pulumi program without the
`slow` mark fails, with a message that names it.

A pytest plugin (tests/conftest.py loads it). It knows the test being set up, run or torn down,
and sees the two ways a test renders the program:
- in the test's own process, under the SDK's mocks, whatever the entry point (the test engine,
  `azdl.review.render`, the program's `__main__`): the SDK's `MockMonitor` registers one of the
  program's components (`azdl:infra:*`). Every monitor the mocks use is one (the recording
  monitors subclass it and call it);
- in the process `azdl plan` renders in (`python -m azdl.review.render_cache`), started from the
  test's process: the interpreter's `subprocess.Popen` audit event (PEP 578).
A render in another process the test starts (the `azdl` command run as a child) is not seen.

At the render the plugin raises `UnmarkedRender`, which stops it; the test's report fails with
the message even where the code under test caught the exception.
"""

import importlib.util
import sys

import pytest

COMPONENT_TYPES = "azdl:infra:"  # the program's components (infra/*.py)
RENDER_MODULE = "azdl.review.render_cache"  # what `azdl plan` renders in (azdl/review/plan.py)


class UnmarkedRender(Exception):
    """A test renders the program without the `slow` mark."""


class _Current:
    item: pytest.Item | None = None
    unmarked: dict[str, str] = {}  # nodeid -> the message  # noqa: RUF012


def check(what: str) -> None:
    """Raise UnmarkedRender if the test being run is not marked slow; `what`: the render seen."""
    item = _Current.item
    if item is None or item.get_closest_marker("slow") is not None:
        return
    message = (
        f"{item.nodeid} renders the Pulumi program ({what}) but is not marked slow: mark it "
        "@pytest.mark.slow, or take the rendering from a fixture tests/conftest.py marks by "
        "(docs/testing.md)"
    )
    _Current.unmarked.setdefault(item.nodeid, message)
    raise UnmarkedRender(message)


def _watch_the_mock_monitor() -> None:
    from pulumi.runtime.mocks import MockMonitor

    register = MockMonitor.RegisterResource

    def registering(self, request):
        if request.type.startswith(COMPONENT_TYPES):
            check(f"registers {request.type} under the SDK's mocks")
        return register(self, request)

    MockMonitor.RegisterResource = registering


def _audit(event: str, args: tuple) -> None:
    if event != "subprocess.Popen":
        return
    argv = args[1]
    words = [argv] if isinstance(argv, str | bytes) else list(argv)
    if any(RENDER_MODULE in (w.decode() if isinstance(w, bytes) else str(w)) for w in words):
        check(f"starts `python -m {RENDER_MODULE}`, the process `azdl plan` renders in")


def pytest_configure(config: pytest.Config) -> None:
    # The training environment has no Pulumi, and renders nothing.
    if importlib.util.find_spec("pulumi") is not None:
        _watch_the_mock_monitor()
    sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _Current.item = item
    try:
        return (yield)
    finally:
        _Current.item = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    message = _Current.unmarked.get(item.nodeid)
    if message and report.when in ("setup", "call") and report.passed:
        report.outcome = "failed"
        report.longrepr = message
    return report
