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
    """The exception azure-ai-ml 1.35.2 raises for a refused code upload. Read in its source
    (azure/ai/ml): `BlobStorageClient.check_blob_exists` (_artifacts/_blob_storage_helper.py)
    raises a `ValidationException` ("You don't have permission to alter this storage account")
    `from` the storage 403 `AuthorizationPermissionMismatch`; `CodeOperations.create_or_update`
    (operations/_code_operations.py), inside `MLClient.jobs.create_or_update`, catches it and
    `log_and_raise_error` (_exception_helper.py) raises a new `MlException` while handling it:
    the 403 is then the `__cause__` of its `__context__` (refusal() follows both).
    `MlException` is the base of both. Imported on use: azure-ai-ml takes seconds to import,
    and data staging never needs it."""
    from azure.ai.ml.exceptions import MlException

    return (MlException,)


def refusal(exc: BaseException) -> HttpResponseError | None:
    """The storage or ARM error behind `exc`: itself, or the nearest one along the chain
    Python's traceback prints: `__cause__` (`raise ... from`), else `__context__` (raised while
    handling it) unless `raise ... from None` suppressed it."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, HttpResponseError):
            return link
        seen.add(id(link))
        if link.__cause__ is not None:
            link = link.__cause__
        else:
            link = None if link.__suppress_context__ else link.__context__
    return None


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
