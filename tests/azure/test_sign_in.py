"""Commands that need Azure probe the sign-in once, first, and fail in one line with their own
exit code; an endpoint that does not answer fails in bounded time, named.

The credential boundary is the Azure CLI process that azure-identity's AzureCliCredential runs
(`az account get-access-token`): a stand-in `az` on PATH answers as the real one does, and
azure-identity's own code (azure/identity/_credentials/azure_cli.py, 1.27) classifies the
answer. Nothing else of azure-identity is replaced, except for the unreachable endpoint, where
the token itself is given (DefaultAzureCredential.get_token) so that only the network fails.
"""

import socket
import time
from pathlib import Path

import pytest
from azure.core.credentials import AccessToken, AccessTokenInfo

from azdl import credentials
from azdl.cli import main
from azdl.errors import NotSignedIn, Unreachable

EXAMPLE_OUTPUTS = Path(__file__).resolve().parents[2] / "docs" / "stack-outputs.example.json"
# What `az account get-access-token` prints on stderr (exit 1) without a sign-in, and once the
# refresh token has expired (Azure CLI 2.x wording; AADSTS700082 is Entra ID's code for it).
NOT_LOGGED_IN = "ERROR: Please run 'az login' to setup account."
EXPIRED = (
    "ERROR: AADSTS700082: The refresh token has expired due to inactivity. The token was issued "
    "on 2026-08-01T10:00:00Z and was inactive for 90.00:00:00.\nTo re-authenticate, please run:"
    "\naz login --scope https://management.core.windows.net//.default"
)


@pytest.fixture
def azure_cli(tmp_path, monkeypatch):
    """A stand-in `az` that fails with `stderr`; returns the file counting its calls."""
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
                 "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    bin_dir, calls = tmp_path / "bin", tmp_path / "az-calls"
    bin_dir.mkdir()

    def install(stderr: str | None) -> Path:
        if stderr is not None:
            az = bin_dir / "az"
            az.write_text(
                f"#!/bin/sh\necho call >> {calls}\ncat >&2 <<'EOF'\n{stderr}\nEOF\nexit 1\n"
            )
            az.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        return calls

    return install


def calls_of(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def stage(folder: Path, capsys, account_url="https://azdltest.blob.core.windows.net"):
    started = time.monotonic()
    code = main(["data", "stage", str(folder), "--account-url", account_url, "--container", "c"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, time.monotonic() - started


@pytest.mark.parametrize(
    "az_stderr, advice",
    [
        (NOT_LOGGED_IN, "error: not signed in to Azure: run `az login`\n"),
        (None, "error: not signed in to Azure: install the Azure CLI and run `az login`\n"),
    ],
)
def test_stage_without_a_sign_in_is_one_line_with_its_own_exit_code(
    azure_cli, make_dataset, tmp_path, capsys, az_stderr, advice
):
    make_dataset(tmp_path / "shards", [1000, 2000])
    calls = azure_cli(az_stderr)
    code, out, err, seconds = stage(tmp_path / "shards", capsys)
    assert (code, err, out) == (NotSignedIn.exit_code, advice, "")
    assert code == 4 and seconds < 15
    assert calls_of(calls) == (1 if az_stderr else 0)  # probed once


def test_an_expired_sign_in_names_the_reason_and_what_to_run(
    azure_cli, make_dataset, tmp_path, capsys
):
    make_dataset(tmp_path / "shards", [1000])
    azure_cli(EXPIRED)
    code, _, err, _ = stage(tmp_path / "shards", capsys)
    assert code == 4 and err.count("\n") == 1
    assert err.startswith("error: the Azure CLI's sign-in failed or expired (")
    assert "AADSTS700082" in err and err.endswith(": run `az login`\n")


@pytest.mark.parametrize(
    "command",
    [["submit", "--data-path", "imagenet"], ["data", "fill-nfs"], ["bench", "--nodes", "1"]],
)
def test_jobs_without_a_sign_in_stop_before_a_client_is_made(
    azure_cli, mocker, capsys, tmp_path, command
):
    client = mocker.patch("azure.ai.ml.MLClient")
    calls = azure_cli(NOT_LOGGED_IN)
    out = ["--out", str(tmp_path / "report")] if command[0] == "bench" else []
    code = main([*command, *out, "--outputs", str(EXAMPLE_OUTPUTS)])
    assert code == 4
    assert capsys.readouterr().err == "error: not signed in to Azure: run `az login`\n"
    client.assert_not_called()
    assert calls_of(calls) == 1
    assert not (tmp_path / "report").exists()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


def test_an_unreachable_storage_endpoint_fails_in_bounded_time_naming_it(
    token, make_dataset, tmp_path, capsys
):
    make_dataset(tmp_path / "shards", [1000])
    endpoint = f"https://127.0.0.1:{closed_port()}"
    code, _, err, seconds = stage(tmp_path / "shards", capsys, account_url=endpoint)
    assert code == Unreachable.exit_code == 5
    assert err.startswith(f"error: cannot reach {endpoint}/c") and err.count("\n") == 1
    # One retry after a 2 s back-off; the SDK's defaults (15 s back-off, 3 connection retries)
    # took over a minute here.
    assert seconds < 10, seconds


@pytest.fixture
def token(mocker):
    """A valid token from DefaultAzureCredential, so that only the network can fail."""
    expires = int(time.time()) + 3600  # the probe asks get_token, the SDKs get_token_info
    mocker.patch(
        "azure.identity.DefaultAzureCredential.get_token",
        return_value=AccessToken("token", expires),
    )
    mocker.patch(
        "azure.identity.DefaultAzureCredential.get_token_info",
        return_value=AccessTokenInfo("token", expires),
    )


def test_an_unreachable_workspace_endpoint_fails_in_bounded_time_naming_it(
    token, monkeypatch, capsys
):
    port = closed_port()
    # azure-ai-ml's own override of the Azure ML endpoint (azure/ai/ml/_utils/utils.py,
    # DEVELOPER_URL_MFE_ENV_VAR), pointed at a port nobody listens on.
    monkeypatch.setenv("AZUREML_DEV_URL_MFE", f"https://127.0.0.1:{port}")
    started = time.monotonic()
    code = main(["submit", "--outputs", str(EXAMPLE_OUTPUTS), "--data-path", "x"])
    seconds = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 5 and err.count("\n") == 1, err
    assert err.startswith("error: cannot reach an Azure endpoint: ") and f"port={port}" in err
    # One connection retry after azure-core's 0.8 s back-off. With its default of three, the
    # back-offs alone (0.8 + 1.6 + 3.2 s) would take longer than this bound.
    assert seconds < 5, seconds


def test_a_sign_in_that_hangs_is_cut_off(mocker, monkeypatch):
    monkeypatch.setattr(credentials, "PROBE_TIMEOUT_S", 0.5)
    mocker.patch(
        "azure.identity.DefaultAzureCredential.get_token", side_effect=lambda *a: time.sleep(30)
    )
    started = time.monotonic()
    with pytest.raises(Unreachable, match=r"did not finish in 0\.5 s"):
        credentials.credential(credentials.ARM_SCOPE)
    assert time.monotonic() - started < 5


def test_a_managed_identity_that_refuses_is_named(monkeypatch):
    monkeypatch.setenv("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555")
    message = (
        "DefaultAzureCredential failed to retrieve a token from the included credentials.\n"
        "Attempted credentials:\n\tEnvironmentCredential: EnvironmentCredential authentication "
        "unavailable. Environment variables are not fully configured.\n"
        "\tManagedIdentityCredential: (invalid_request) Identity not found\n"
    )
    line = credentials.advice(message)
    assert line.startswith("the managed identity (user-assigned, client id 11111111-")
    assert "Identity not found" in line and "\n" not in line


def test_exit_codes_are_documented():
    cli_doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for code, what in ((2, "bad input"), (4, "not signed in"), (5, "an Azure endpoint could not")):
        assert f"| {code} | {what}" in cli_doc, code
