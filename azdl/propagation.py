"""Retry what Azure refuses with 403 while new role assignments take effect (docs/architecture.md,
"Sign-in and role propagation")."""

import sys
import time
from collections.abc import Callable
from typing import TypeVar

from azure.core.exceptions import HttpResponseError

from azdl.errors import AzdlError

# "When you assign roles or remove role assignments, it can take up to 10 minutes for changes to
# take effect" (Troubleshoot Azure RBAC, https://learn.microsoft.com/azure/role-based-access-
# control/troubleshooting, ms.date 2025-12-11).
PROPAGATION_SECONDS = 600
RETRY_EVERY_SECONDS = 20
# 403 error codes that no waiting fixes: a rejected credential, or network rules that do not
# admit this machine (Azure Storage's error codes).
NOT_PROPAGATION = ("AuthenticationFailed", "AuthorizationFailure")

T = TypeVar("T")


def error_code(exc: HttpResponseError) -> str:
    code = getattr(exc.error_code, "value", exc.error_code)
    if code is None and exc.error is not None:
        code = exc.error.code
    return str(code or "Forbidden")


def code_upload_refusals() -> tuple[type[Exception], ...]:
    """The exception azure-ai-ml 1.35.2 wraps a refused code upload in:
    `BlobStorageClient.check_blob_exists` (azure/ai/ml/_artifacts/_blob_storage_helper.py)
    raises a `ValidationException` ("You don't have permission to alter this storage account")
    `from` the storage 403 `AuthorizationPermissionMismatch`. Imported on use: azure-ai-ml takes
    seconds to import, and data staging never needs it."""
    from azure.ai.ml.exceptions import ValidationException

    return (ValidationException,)


def refusal(exc: BaseException) -> HttpResponseError | None:
    """The storage or ARM error behind `exc`: itself, or the one it was raised from."""
    if isinstance(exc, HttpResponseError):
        return exc
    return exc.__cause__ if isinstance(exc.__cause__, HttpResponseError) else None


def may_be_propagating(exc: BaseException) -> bool:
    """A 403 for missing rights, which a role assignment still taking effect explains."""
    return (
        isinstance(exc, HttpResponseError)
        and exc.status_code == 403
        and error_code(exc) not in NOT_PROPAGATION
    )


def while_propagating(
    call: Callable[[], T],
    what: str,
    *,
    wrapped: tuple[type[Exception], ...] = (),
    window_seconds: float = PROPAGATION_SECONDS,
    every_seconds: float = RETRY_EVERY_SECONDS,
    say: Callable[[str], object] = lambda line: print(line, file=sys.stderr),
    sleep: Callable[[float], object] | None = None,
    clock: Callable[[], float] | None = None,
) -> T:
    """`call()`, retried every `every_seconds` while it fails with a 403 that role
    propagation explains, for at most `window_seconds`; then an AzdlError naming the refusal.
    `wrapped`: exception types a library raises from such a 403 (code_upload_refusals())."""
    sleep, clock = sleep or time.sleep, clock or time.monotonic
    start, told = clock(), False
    while True:
        try:
            return call()
        except (HttpResponseError, *wrapped) as caught:
            exc = refusal(caught)
            if exc is None or not may_be_propagating(exc):
                raise
            waited = clock() - start
            if waited + every_seconds > window_seconds:
                raise AzdlError(
                    f"{what}: Azure still refuses access ({error_code(exc)}, HTTP 403) after "
                    f"{waited:.0f} s, longer than role assignments take to take effect (up to "
                    f"{window_seconds / 60:.0f} minutes): the signed-in principal lacks the role "
                    "(docs/access.md lists each command's roles; `az login` again if they were "
                    "granted while you were signed in)"
                ) from exc
            if not told:
                say(
                    f"{what}: Azure answered 403 ({error_code(exc)}). Role assignments made by "
                    f"`pulumi up` can take up to {window_seconds / 60:.0f} minutes to take "
                    f"effect; retrying every {every_seconds:.0f} s until then (Ctrl-C stops)."
                )
                told = True
            sleep(every_seconds)
