"""nccl-tests' all_reduce_perf output, parsed, and its bus bandwidth judged against levels.

The output format is nccl-tests' own (NVIDIA/nccl-tests v2.19.6, src/util.cu): `#  Rank N Group G
Pid P on HOST device D [BUS] NAME` lines, one row per message size (size, count, type, redop,
root, then time/algbw/busbw/#wrong out-of-place and in-place), and the summary lines
`# Out of bounds values : N OK|FAILED` and `# Avg bus bandwidth    : X`. Like Azure's node health
check (Azure/azurehpc-health-checks customTests/azure_nccl_allreduce.nhc), the gate runs one
large message size and compares the average bus bandwidth; a FAILED line is a failure.
"""

import re
from dataclasses import dataclass

_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+(.*)$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")


@dataclass(frozen=True)
class AllReduceResult:
    avg_busbw_gbps: float
    largest_bytes: int  # the largest message size measured
    largest_busbw_gbps: float  # out-of-place busbw at that size
    wrong_values: int  # "Out of bounds values"
    hosts: tuple[str, ...]  # in rank order, one entry per distinct host


def parse(text: str) -> AllReduceResult:
    """The figures of one all_reduce_perf run; ValueError when the output has none (the run
    failed before measuring: its own error is in the text)."""
    hosts: list[str] = []
    rows: list[tuple[int, float]] = []
    avg = wrong = None
    for line in text.splitlines():
        if match := _RANK.match(line):
            if match.group(3) not in hosts:
                hosts.append(match.group(3))
        elif match := _AVG.match(line):
            avg = float(match.group(1))
        elif match := _OOB.match(line):
            wrong = int(match.group(1))
        elif match := _ROW.match(line):
            fields = match.group(3).split()  # time algbw busbw #wrong (out-of-place), in-place…
            rows.append((int(match.group(1)), float(fields[2])))
    if avg is None or wrong is None or not rows:
        raise ValueError("no all_reduce_perf results in the output (did the run fail?)")
    size, busbw = max(rows)
    return AllReduceResult(avg, size, busbw, wrong, tuple(hosts))


@dataclass(frozen=True)
class Verdict:
    status: str  # pass | warn | fail
    message: str


def judge(result: AllReduceResult, warn_below: float | None, fail_below: float | None,
          expected: float | None, where: str) -> Verdict:  # fmt: skip
    """pass, warn or fail for `result`, in a sentence that names `where` it was measured."""
    figure = f"{where}: all-reduce bus bandwidth {result.avg_busbw_gbps:g} GB/s"
    if expected is not None:
        figure += f" (expected about {expected:g})"
    if result.wrong_values:
        return Verdict("fail", f"{where}: all-reduce gave {result.wrong_values} wrong values")
    if fail_below is not None and result.avg_busbw_gbps < fail_below:
        return Verdict("fail", f"{figure}, below the failure level {fail_below:g}")
    if warn_below is not None and result.avg_busbw_gbps < warn_below:
        return Verdict("warn", f"{figure}, below the warning level {warn_below:g}")
    return Verdict("pass", figure)
