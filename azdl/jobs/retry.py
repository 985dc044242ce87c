"""`azdl submit --max-retries N`: whether a job that ended should be resubmitted from its last
checkpoint (`azdl.jobs.submit` follows and resubmits it).

The reason comes from the job's status, Azure ML's error on the run (the text azure-ai-ml's
`jobs.stream` raises as JobException for a failed job) and the job's log lines:

- retried: a low-priority node pre-empted (Azure ML's error `PreemptionError: Nodes of this job
  got pre-empted`, Azure/MachineLearningNotebooks#1242, 2020-11-18); a node or the service lost
  (status `NotResponding`, azure-ai-ml's terminal statuses); NCCL's system and network errors
  (the ncclResult_t codes `ncclSystemError` and `ncclRemoteError` of NVIDIA/nccl's nccl.h, and
  their ncclGetErrorString texts "unhandled system error" and "remote process exited or there
  was a network error"), and NCCL's InfiniBand warnings (`NCCL WARN NET/IB : Got completion
  from peer … with error 12`, as in stas00/ml-engineering debug/pytorch.md); a failed pre-flight
  health gate (`azdl-health: FAIL`, training/health/gate.py): the cluster may give the next
  attempt other nodes (Azure ML can't exclude a node from a job, hence the bound N).
- not retried: the user's code (a Python traceback, an argument the script rejects, or
  `JobFailed: Submitted script failed with a non-zero exit code` with no transient sign,
  Azure/MachineLearningNotebooks#1360, 2021-02-23), a cancelled job, and anything not
  recognised: retrying those would only spend GPU hours again.

Each attempt after the first resumes from the first attempt's checkpoints folder (the
`--resume-from` mechanism) and is tagged with the chain (`azdl.attempt`, `azdl.retry_of`), which
`azdl jobs show` prints.
"""

import re
from dataclasses import dataclass

TRANSIENT = (
    (re.compile(r"PreemptionError|got pre-empted", re.I), "a node was pre-empted"),
    (re.compile(r"^azdl-health: FAIL", re.M), "the pre-flight health gate failed"),
    (
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
