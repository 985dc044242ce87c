"""`azdl submit --max-retries N`: whether a job that ended should be resubmitted from its last
checkpoint (`azdl.jobs.submit` follows and resubmits it). The sources of each pattern are listed
in docs/architecture.md, "Retries"."""

import re
from dataclasses import dataclass

from training import guard
from training.health.gate import PREFIX as GATE

# What a node does wrong, not the user's code: each is looked for before the user-code signs,
# since a hardware fault reaches the log as a Python traceback too.
TRANSIENT = (
    # Azure ML's error for a pre-empted low-priority node (Azure/MachineLearningNotebooks#1242).
    (re.compile(r"PreemptionError|got pre-empted", re.I), "a node was pre-empted"),
    # training/health/gate.py's verdict: the next attempt may get other nodes.
    (re.compile(rf"^{GATE} FAIL", re.M), "the pre-flight health gate failed"),
    (
        # cudaErrorECCUncorrectable's text (cudaGetErrorString), which PyTorch raises as
        # "CUDA error: <text>" (pytorch/pytorch c10/cuda/CUDAException.cpp at 0e4c6cd); NVIDIA's
        # CUDA runtime API reference: "an uncorrectable ECC error was detected during execution".
        re.compile(r"uncorrectable ECC error encountered|cudaErrorECCUncorrectable"),
        "a GPU had an uncorrectable ECC memory error",
    ),
    (
        # Xid 79, GPU_HAS_FALLEN_OFF_THE_BUS in NVIDIA's Xid catalog (docs.nvidia.com/deploy/
        # xid-errors/analyzing-xid-catalog.html, read 2026-11-26), as the driver logs it:
        # "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus." (the kernel log quoted in
        # NVIDIA/open-gpu-kernel-modules#1151, 2026-05-18).
        re.compile(r"NVRM: Xid \(PCI:[0-9A-Fa-f:.]+\): 79,|GPU has fallen off the bus"),
        "a GPU fell off the bus (Xid 79)",
    ),
    (
        # ncclSystemError / ncclRemoteError and their ncclGetErrorString texts (NVIDIA/nccl's
        # nccl.h.in and src/init.cc at 5067397, v2.30.7); NCCL's InfiniBand completion errors,
        # "NCCL WARN NET/IB: Got completion from peer ..." (src/transport/net_ib/p2p.cc there;
        # "NET/IB : Got completion" before 2.23, stas00/ml-engineering debug/pytorch.md).
        re.compile(
            r"ncclSystemError|ncclRemoteError|unhandled system error|remote process exited or "
            r"there was a network error|NCCL WARN NET/IB"
        ),
        "an NCCL network or system error",
    ),
    (
        # PyTorch's NCCL watchdog ending a collective that did not finish in its timeout
        # (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp at cf1380d,
        # WorkNCCL::checkTimeout): a rank or a link stopped, not the script's logic.
        re.compile(r"Watchdog caught collective operation timeout"),
        "a collective timed out in PyTorch's NCCL watchdog",
    ),
    (
        # training/guard.py's own stop: NCCL without GPUDirect RDMA or InfiniBand (exit 3).
        re.compile(rf"^{guard.PREFIX} {guard.IB_STOP_LINE} ", re.M),
        "the guard stopped a rank: InfiniBand or GPUDirect RDMA missing on its node",
    ),
    (
        # training/guard.py's init deadline and progress watchdog (exit 4).
        re.compile(rf"^{guard.PREFIX} {guard.HANG_LINE} ", re.M),
        "the guard ended a hung rank (NCCL init deadline or no training step in time)",
    ),
)
# The nodes that the gate and the guard name in their stop lines ("... node HOST is unhealthy",
# "... rank N on HOST: ...").
BAD_NODE = re.compile(
    rf"^{GATE} FAIL node (?P<gate>\S+) is unhealthy|^{guard.PREFIX} "
    rf"(?:{guard.IB_STOP_LINE}|{guard.HANG_LINE}) rank \S+ on (?P<guard>[^:\s]+)",
    re.M,
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
            return Outcome(True, reason + bad_nodes(text))
    for pattern, reason in USER_CODE:
        if pattern.search(text):
            return Outcome(False, f"{reason}: fix the code or its arguments, then submit again")
    return Outcome(False, f"{status} for a reason not recognised as transient (see its logs)")


def bad_nodes(text: str) -> str:
    """The nodes the gate or the guard named, as words to add to the reason ("" if none)."""
    nodes = sorted({m.group("gate") or m.group("guard") for m in BAD_NODE.finditer(text)})
    if not nodes:
        return ""
    return f' (on {", ".join(nodes)}: docs/jobs.md, "A bad node")'
