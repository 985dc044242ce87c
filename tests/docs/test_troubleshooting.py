"""The messages the troubleshooting page quotes as azdl's are the ones azdl prints. Those of bad
input at the command line are in a checked block (tests/docs/test_docs_examples.py runs it);
the rest, which need a refusing endpoint, a missing Pulumi CLI or a misspelt stack key, are
produced here and compared with the page's quote (`…` stands for any text)."""

import re
from pathlib import Path

import pytest

from azdl.errors import AzdlError
from azdl.jobs import stack_outputs
from infra.config import ConfigError, load_config
from tests.azure.fake_clock import Clock
from tests.azure.refusing_endpoint import Refusing, container, retry  # noqa: F401 (a fixture)
from tests.support.minimal_config import VALID

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"


def quotes() -> list[str]:
    """The page's inline code spans (single or double backticks) outside its fenced blocks,
    whitespace folded."""
    prose = re.sub(r"^```.*?^```$", "", PAGE.read_text(), flags=re.M | re.S)
    text = " ".join(prose.split())
    spans = re.findall(r"``(.+?)``|`([^`]+)`", text)
    return [span.strip() for pair in spans for span in pair if span]


def shows(quote: str, message: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in quote.split("…"))
    return re.search(pattern, " ".join(message.split())) is not None


def quoted(start: str) -> str:
    found = [q for q in quotes() if q.startswith(start)]
    assert len(found) == 1, f"the page quotes {start!r} {len(found)} times"
    return found[0]


def message(exc: pytest.ExceptionInfo) -> str:
    return str(exc.value)


def test_the_403_retry_note_and_refusal(container):  # noqa: F811 (the fixture)
    clock, said = Clock(), []
    retry(container, clock, said.append)
    assert shows(quoted("…: Azure answered 403"), said[0]), said[0]
    Refusing.refusals = 10**6
    try:
        with pytest.raises(AzdlError) as refused:
            retry(container, Clock())
    finally:
        Refusing.refusals = 2
    assert shows(quoted("…: Azure still refuses access"), message(refused)), message(refused)


def test_no_pulumi_cli(mocker):
    mocker.patch("shutil.which", return_value=None)
    with pytest.raises(AzdlError) as refused:
        stack_outputs.load_outputs("dev")
    assert shows(quoted("the Pulumi CLI is not on PATH"), message(refused))


def test_an_edited_outputs_file(tmp_path):
    example = (ROOT / "docs" / "stack-outputs.example.json").read_text()
    edited = tmp_path / "dev.json"
    edited.write_text(re.sub(r'"clusterMaxNodes": \d+', '"clusterMaxNodes": 0', example))
    with pytest.raises(AzdlError) as refused:
        stack_outputs.load_outputs(outputs_file=edited)
    assert shows(quoted("clusterMaxNodes = "), message(refused)), message(refused)


def test_a_misspelt_stack_key():
    with pytest.raises(ConfigError) as refused:
        load_config({**VALID, "azdl:cluster": {"maxNode": 2}}, stack="dev")
    assert shows(quoted("unknown key; known:"), message(refused)), message(refused)


def test_a_wrong_quote_is_caught():
    said = "x: Azure answered 403 (AuthorizationFailure). Role assignments made by `pulumi up`"
    assert shows("Azure answered 403 (…). Role assignments made by `pulumi up`", said)
    assert not shows("Azure answered 403 (…). Role assignments made by pulumi up", said)
