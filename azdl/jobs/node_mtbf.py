"""A node's mean time between failures for `--checkpoint-every-steps auto`
(training.checkpoint_plan), from the stack's own history: the workspace's ended azdl jobs on
nodes of the cluster's VM size and priority (Azure ML's compute `size` and `tier`), each job's
billed node-hours as its ledger counts them (azdl.jobs.ledger_job) and whether it ended by an
interruption, a failure `azdl submit --max-retries` would retry (azdl.jobs.retry.classify: a
node, its GPUs, the network, a pre-emption; never the script's own error or a cancellation).

Few jobs say little, so the estimate starts from the cited default and moves toward the stack's
own rate as node-hours accumulate: with a gamma prior on the failure rate worth one interruption
in one default MTBF (training.checkpoint_plan.NODE_MTBF_H, Llama 3's figure), T node-hours and k
interruptions give the posterior mean rate (1 + k) / (NODE_MTBF_H + T), the gamma-Poisson
conjugate update (Gelman et al., "Bayesian Data Analysis", 3rd ed., section 2.6), so

    node MTBF = (NODE_MTBF_H + T) / (1 + k)

A new stack gets the default; 6,335 node-hours with 9 interruptions give 1,267 h. An ended job
never changes, so each is read once (its events, and its logs if it failed) and kept in the
project's `runs/history/<workspace>.json`."""

import itertools
import json
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from azdl import project
from azdl.jobs import ledger_job
from training.checkpoint_plan import NODE_MTBF_ENV, NODE_MTBF_H

# A job azdl submitted carries it (azdl.jobs.spec); others are not azdl's to judge.
AZDL_TAG = "azdl.framework"
PRIOR = "Llama 3's 6,335 node-hours (arXiv:2407.21783, 3.3.4)"
# --dry-run and --export do not sign in: the job's workers keep the default.
NOT_READ = (
    f"node MTBF for --checkpoint-every-steps auto: the workers' default, {PRIOR}; the stack's "
    "own history is read when the job is submitted (it needs the workspace)"
)


@dataclass(frozen=True)
class Exposure:
    """One ended job as the history counts it."""

    job: str
    compute: str
    vm_size: str
    tier: str  # Azure ML's: dedicated | low_priority
    node_hours: float  # billed (its ledger's attempt: first event, or creation, to its end)
    interrupted: bool
    reason: str  # azdl.jobs.retry.classify's


@dataclass(frozen=True)
class Estimate:
    node_mtbf_h: float
    vm_size: str
    tier: str
    node_hours: float
    interruptions: int
    jobs: int

    def line(self) -> str:
        """The estimate with its inputs, as submit prints it."""
        of = f"{self.vm_size} {self.tier} nodes"
        if not self.jobs:
            return (f"node MTBF {self.node_mtbf_h:,.0f} h for --checkpoint-every-steps auto: "
                    f"no ended azdl job on {of} yet, so the default, {PRIOR}")  # fmt: skip
        return (
            f"node MTBF {self.node_mtbf_h:,.0f} h for --checkpoint-every-steps auto: this "
            f"stack's {self.jobs} ended job(s) on {of}, {self.node_hours:,.1f} node-hours with "
            f"{self.interruptions} interruption(s), weighed with {PRIOR} as one prior "
            f"interruption: ({NODE_MTBF_H:,.0f} + {self.node_hours:,.1f}) / "
            f'(1 + {self.interruptions}) (docs/jobs.md, "The checkpoint interval")'
        )


def estimate(history: list[Exposure], vm_size: str, tier: str) -> Estimate:
    """The node MTBF on `vm_size` `tier` nodes from the jobs of `history` on such nodes."""
    mine = [e for e in history if (e.vm_size, e.tier) == (vm_size, tier)]
    hours = sum(e.node_hours for e in mine)
    interruptions = sum(e.interrupted for e in mine)
    mtbf = (NODE_MTBF_H + hours) / (1 + interruptions)
    return Estimate(mtbf, vm_size, tier, hours, interruptions, len(mine))


def compute_name(job) -> str:
    """The compute's name from the job's `compute`, an ARM id once Azure ML has the job."""
    return str(job.compute).rsplit("/computes/", 1)[-1]


def exposure(client, job, compute, outputs) -> Exposure:
    """One ended job's billed node-hours and whether an interruption ended it."""
    from azdl.jobs.retry import classify
    from azdl.jobs.workspace import job_logs

    attempt = ledger_job.attempt_of(job, ledger_job.job_events(job, outputs), datetime.now(UTC))
    status = getattr(job.status, "value", job.status)
    outcome = classify(status, "", job_logs(client, job.name) if status == "Failed" else "")
    hours = (attempt.end_ms - attempt.start_ms) * attempt.nodes / 3_600_000
    return Exposure(job.name, compute.name, compute.size, compute.tier, round(hours, 6),
                    outcome.retry, outcome.reason)  # fmt: skip


def history_file(workspace: str) -> Path:
    return project.runs_dir() / "history" / f"{workspace}.json"


def history(client, outputs) -> list[Exposure]:
    """Every ended azdl job of the workspace, on a compute that still exists; the ones not in
    the project's history file yet are read (said on stderr) and added to it."""
    from azure.core.exceptions import ResourceNotFoundError

    from azdl.jobs.workspace import TERMINAL

    path = history_file(outputs.workspace_name)
    kept = json.loads(path.read_text()) if path.is_file() else {}
    ended = [job for job in client.jobs.list()
             if AZDL_TAG in (job.tags or {})
             and getattr(job.status, "value", job.status) in TERMINAL]  # fmt: skip
    new = [job for job in ended if job.name not in kept]
    computes: dict[str, object] = {}
    for number, job in enumerate(new, 1):
        print(f"azdl: reading the history, job {number} of {len(new)}: {job.name}", file=sys.stderr)
        name = compute_name(job)
        if name not in computes:
            try:
                computes[name] = client.compute.get(name)
            except ResourceNotFoundError:
                computes[name] = None  # deleted: its size and tier are unknown
        if computes[name] is not None:
            kept[job.name] = asdict(exposure(client, job, computes[name], outputs))
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    return [Exposure(**kept[job.name]) for job in ended if job.name in kept]


def for_cluster(client, outputs) -> Estimate:
    """The node MTBF on the stack's cluster's nodes, from the workspace's history."""
    cluster = client.compute.get(outputs.cluster_name)
    return estimate(history(client, outputs), cluster.size, cluster.tier)


def wanted(training_args) -> bool:
    """Whether the job's arguments ask for `--checkpoint-every-steps auto`."""
    args = list(training_args)
    pairs = itertools.pairwise(args)
    return "--checkpoint-every-steps=auto" in args or ("--checkpoint-every-steps", "auto") in pairs


def environment(node_mtbf_h: float | None) -> dict[str, str]:
    """The workers' variable that training.checkpoint_plan reads (none: its default)."""
    return {} if node_mtbf_h is None else {NODE_MTBF_ENV: f"{node_mtbf_h:.1f}"}
