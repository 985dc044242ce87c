"""`azdl submit --max-retries N`: whether a job that ended should be resubmitted from its last
checkpoint (`azdl.jobs.submit` follows and resubmits it). The sources of each pattern are listed
in docs/architecture.md, "Retries"."""

import re
from dataclasses import dataclass

TRANSIENT = (
    # Azure ML's error for a pre-empted low-priority node (Azure/MachineLearningNotebooks#1242).
    (re.compile(r"PreemptionError|got pre-empted", re.I), "a node was pre-empted"),
    # training/health/gate.py's verdict: the next attempt may get other nodes.
    (re.compile(r"^azdl-health: FAIL", re.M), "the pre-flight health gate failed"),
    (
        # ncclSystemError / ncclRemoteError and their ncclGetErrorString texts (NVIDIA/nccl's
        # nccl.h); NCCL's InfiniBand warnings (stas00/ml-engineering, debug/pytorch.md).
        re.compile(
            r"ncclSystemError|ncclRemoteError|unhandled system error|remote process exited or "
            r"there was a network error|NCCL WARN NET/IB"
        ),
        "an NCCL network or system error",
    ),
)
USER_CODE = (
    (re.compile(r"Traceback \(most recent call last\)"), "the script raised a Python exception"),
    (re.compile(r"^(usage: .*\n)?\S+: error: ", re.M), "the script rejected its arguments"),
    (
        # Azure/MachineLearningNotebooks#1360: the script exited non-zero, no transient sign.
        re.compile(r"Submitted script failed with a non-zero exit code"),
        "the script exited non-zero",
    ),
)


@dataclass(frozen=True)
class Outcome:
    retry: bool
    reason: str


def classify(status: str, error: str, logs: str) -> Outcome:
    """Whether a job that ended in `status` is worth running again, and why."""
    if status == "Completed":
        return Outcome(False, "completed")
    if status == "Canceled":
        return Outcome(False, "cancelled (by a person or a time limit)")
    if status == "NotResponding":
        return Outcome(True, "Azure ML lost contact with the job (NotResponding)")
    text = f"{error}\n{logs}"
    for pattern, reason in TRANSIENT:
        if pattern.search(text):
            return Outcome(True, reason)
    for pattern, reason in USER_CODE:
        if pattern.search(text):
            return Outcome(False, f"{reason}: fix the code or its arguments, then submit again")
    return Outcome(False, f"{status} for a reason not recognised as transient (see its logs)")
