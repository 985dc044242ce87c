"""The messages the troubleshooting page quotes as azdl's are the ones azdl prints. Those of bad
input at the command line are in a checked block (tests/docs/test_docs_examples.py runs it);
the rest, which need a refusing endpoint, a missing or old Pulumi CLI, a misspelt stack key, a
failed image build or a registry in another cloud, are produced here and compared with the
page's quote (`…` stands for any text)."""

import re
from pathlib import Path

import pulumi
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


def test_a_failed_image_build_in_both_ways_and_a_run_left_in_azure():
    from infra import build_outcome
    from tests.infra.provider_failure import already_exists, operation_error

    with pytest.raises(build_outcome.BuildFailed) as failed:
        result, tag = {"status": "Failed", "runId": "cb1"}, "r.azurecr.io/azdl/tensorflow:abc"
        build_outcome.built_ref("r.azurecr.io", result, tag, "urn:upload", preview=False)
    assert shows(quoted("the ACR Tasks build of"), message(failed)), message(failed)

    def advice(error: str) -> str:
        inputs = {"registryName": "r", "taskRunName": "azdl-tensorflow"}
        args = pulumi.ErrorHookArgs("urn:run", "", "tensorflow-build", "t", new_inputs=inputs,
                                    failed_operation="create", errors=[error])  # fmt: skip
        return build_outcome.run_error_advice(args, "urn:upload")

    said = advice(operation_error(200, "", "the run failed"))
    assert shows(quoted("error: the ACR Tasks run azdl-… failed"), said), said
    said = advice(already_exists("/subscriptions/s/resourceGroups/g/providers/x/azdl-tensorflow"))
    assert shows(quoted("error: the ACR Tasks run azdl-… already exists"), said), said


def test_a_pulumi_cli_too_old(tmp_path, monkeypatch):
    from azdl import pulumi_cli

    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho v3.150.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    said = pulumi_cli.check()
    assert shows(quoted("warning: the Pulumi CLI on PATH"), said), said


def test_a_registry_in_another_cloud():
    from infra import registry

    with pytest.raises(registry.LoginServerMismatch) as stopped:
        registry.confirmed_login_server("r.azurecr.io", {"loginServer": "r.azurecr.us"}, False)
    assert shows(quoted("the registry's login server is"), message(stopped)), message(stopped)
