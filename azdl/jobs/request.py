"""A training job as asked for (JobRequest, a user's OwnScript), where its processes find the
data, and the part of the job that differs between its two kinds (JobPart)."""

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from azdl.jobs import safeguards
from azdl.jobs.azureml import NFS_MOUNT_POINT
from azdl.runtime import module_command

# synthetic: no data input; mount: the data container read-only mounted (blob);
# nfs: the stack's NFS share; copy: blob mount, then each node copies its shards to local disk.
STORAGE_MODES = ("synthetic", "mount", "nfs", "copy")
# The container's own file system sits on the node's local disk on AmlCompute.
DEFAULT_LOCAL_DIR = "/tmp/azdl-data"


@dataclass(frozen=True)
class OwnScript:
    """A user's script and the folder uploaded with it (absolute paths); the requirements file
    and wheel folder, if any, are inside that folder."""

    path: Path
    code_dir: Path
    requirements: Path | None = None
    wheels: Path | None = None  # pip installs from here only (--no-index): no index, no secrets

    def relative(self, path: Path) -> str:
        return path.relative_to(self.code_dir).as_posix()


@dataclass(frozen=True)
class JobRequest:
    framework: str  # keras | tf | torch
    nodes: int
    storage: str  # one of STORAGE_MODES
    run_id: str  # the job's name; also its folder in the outputs container
    training_args: tuple[str, ...] = ()
    data_path: str = ""  # folder inside the data container / NFS share
    experiment: str = "azdl"
    shm_size: str = "16g"
    local_dir: str = DEFAULT_LOCAL_DIR
    nccl_debug: str = "WARN"
    script: OwnScript | None = None  # a user's own script instead of the framework's built-in
    resume_from: str | None = None  # an earlier job (same experiment) whose checkpoints to use
    health_check: bool = False  # the pre-flight gate (azdl.jobs.health) before training
    stall_timeout: int | None = safeguards.CLUSTER_STALL_TIMEOUT_S  # None: no stall shutdown
    timeout: int | None = None  # Azure ML's limit on the job's run time, seconds (None: default)
    max_cost: float | None = None  # USD: the time limit is what this buys (azdl.jobs.budget)
    spent_usd: float = 0.0  # what earlier attempts of the same job cost (--max-retries)
    # the guard's watchdog: seconds without a training step (None: off; own scripts opt in)
    progress_timeout: int | None = safeguards.CLUSTER_PROGRESS_TIMEOUT_S
    infiniband_check: bool = True  # on InfiniBand GPU sizes: NCCL must use IB (+ GDR across nodes)
    # how the workers start (azdl.launchers.LAUNCHERS): horovod, under Azure ML's MPI with one
    # process per GPU; torchrun, one per node (`distribution: pytorch`; docs/torchrun.md)
    launcher: str = "horovod"
    max_restarts: int = 0  # torchrun restarts every worker this many times after a failure
    # NAME@VERSION of the team's own Azure ML environment instead of azdl's image (None: azdl's;
    # azdl.jobs.own_environment)
    environment: str | None = None
    safeguards: bool = True  # False: no guard around the ranks (--no-safeguards; own environment)
    # --checkpoint-every-steps auto: a node's hours between failures from the stack's history
    # (azdl.jobs.node_mtbf); None: the workers' default
    node_mtbf_h: float | None = None


@dataclass(frozen=True)
class JobPart:
    """What a built-in job or a script job adds to the command job every training job shares."""

    steps: tuple[str, ...]  # shell commands before the workers: in every MPI process, or once
    # per node before torchrun
    worker: tuple[str, ...]  # the command each worker runs
    what: str  # the job, in its description
    before_training: tuple[str, ...] = ()  # shell commands each worker runs first (the copy)
    outputs: tuple[str, ...] = ()  # named outputs besides checkpoints and logs
    environment: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    code: str | None = None  # the folder uploaded as the job's code


def data_folder(request: JobRequest) -> str | None:
    """Where the processes find the data (an Azure ML placeholder for the blob mount)."""
    return {
        "synthetic": None,
        "mount": "${{inputs.data}}",
        "copy": request.local_dir,
        "nfs": f"{NFS_MOUNT_POINT}/{request.data_path}".rstrip("/"),
    }[request.storage]


def copy_step(request: JobRequest) -> list[str]:
    """The node-side copy to local disk (--storage copy), run by every worker process before
    it trains: it coordinates per node itself (training.data.copy_shards: local rank 0 copies
    the node's shards by global rank, the others wait), under MPI or torchrun alike."""
    if request.storage != "copy":
        return []
    copy = [*module_command("training.data.copy_shards"), "--source", "${{inputs.data}}"]
    return [shlex.join([*copy, "--dest", request.local_dir])]
