"""Azure sign-in, probed once at the start of a command that needs Azure: a missing or expired
sign-in is one line saying what to run (exit 4), not the SDK's retries (docs/architecture.md,
"Sign-in and role propagation")."""

import logging
import os
import re
import threading

from azdl.envs import VERBOSE_ENV
from azdl.errors import NotSignedIn, Unreachable

ARM_SCOPE = "https://management.azure.com/.default"  # Azure ML's control plane (MLClient)
STORAGE_SCOPE = "https://storage.azure.com/.default"  # blob data plane
# An upper bound for the whole probe: the Azure CLI alone may take 10 s (azure-identity's
# process timeout), a service principal's sign-in goes through azure-core's retries.
PROBE_TIMEOUT_S = 60.0

# azure-identity 1.27's own messages (azure/identity/_credentials/azure_cli.py: CLI_NOT_FOUND,
# NOT_LOGGED_IN; the chained credential's "Attempted credentials:" list, _credentials/chained.py).
CLI_NOT_FOUND = "Azure CLI not found on path"
NOT_LOGGED_IN = "Please run 'az login' to set up an account"
_ATTEMPT = re.compile(r"^\s*(\w+Credential): (.*)$", re.M)


def _short(reason: str) -> str:
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    return first if len(first) <= 160 else first[:157] + "…"


def advice(message: str, environ: dict[str, str] | None = None) -> str:
    """One line for a failed DefaultAzureCredential: which sign-in failed, and what to run."""
    environ = os.environ if environ is None else environ
    attempts = dict(_ATTEMPT.findall(message))
    managed = attempts.get("ManagedIdentityCredential", "")
    if managed and "unavailable" not in managed:  # an identity endpoint answered, and refused
        identity = environ.get("AZURE_CLIENT_ID")
        which = f"user-assigned, client id {identity}" if identity else "system-assigned"
        return (
            f"the managed identity ({which}) could not get a token: {_short(managed)}; check "
            "that it is assigned to this machine (and that AZURE_CLIENT_ID names it)"
        )
    service_principal = attempts.get("EnvironmentCredential", "")
    if service_principal and "unavailable" not in service_principal:
        return (
            f"the service principal in AZURE_CLIENT_ID/AZURE_TENANT_ID could not sign in: "
            f"{_short(service_principal)}; fix those variables, or unset them and run `az login`"
        )
    cli = attempts.get("AzureCliCredential", "")
    if cli.startswith(CLI_NOT_FOUND):
        return "not signed in to Azure: install the Azure CLI and run `az login`"
    if not cli or cli.startswith(NOT_LOGGED_IN):
        return "not signed in to Azure: run `az login`"
    return f"the Azure CLI's sign-in failed or expired ({_short(cli)}): run `az login`"


def credential(scope: str):
    """A DefaultAzureCredential that has just obtained a token for `scope`, or NotSignedIn
    (one line, what to run), or Unreachable when the sign-in does not finish in time."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import DefaultAzureCredential

    if os.environ.get(VERBOSE_ENV) != "1":
        # azure-identity also logs the failure as a 13-line warning: the same failure this
        # function reports as one line. AZDL_VERBOSE=1 shows it (every source tried, and why).
        logging.getLogger("azure.identity").setLevel(logging.ERROR)
    cred = DefaultAzureCredential()
    outcome: dict[str, BaseException] = {}

    def probe() -> None:
        try:
            cred.get_token(scope)
        except ClientAuthenticationError as exc:  # CredentialUnavailableError is one too
            outcome["refused"] = exc
        except Exception as exc:  # anything else is raised again in the calling thread
            outcome["failed"] = exc

    thread = threading.Thread(target=probe, name="azdl-sign-in", daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT_S)
    if thread.is_alive():
        raise Unreachable(
            f"signing in to Azure did not finish in {PROBE_TIMEOUT_S:g} s: can this machine "
            "reach Microsoft Entra ID (login.microsoftonline.com)? `az login` again if unsure"
        )
    if "refused" in outcome:
        raise NotSignedIn(advice(str(outcome["refused"])))
    if "failed" in outcome:
        raise outcome["failed"]
    return cred
