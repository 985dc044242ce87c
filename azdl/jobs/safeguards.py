"""What `azdl train` and `azdl submit` add to a job so that it cannot silently waste time: the
stall timeout (Horovod's stall inspector; under torchrun the collective timeout, PyTorch's NCCL
watchdog and flight recorder), the per-rank guard (training.guard: rank → host records, stalled
ranks named, NCCL's transport checked on InfiniBand sizes, NCCL's init under a deadline,
training steps under a watchdog) and where MLflow writes locally. No Azure calls; from the
training stack only its stdlib modules.
"""

from pathlib import Path

from azdl.errors import AzdlError
from azdl.runtime import module_command
from training import flight_recorder

# Horovod's stall inspector (horovod/common/stall_inspector.cc, 0.28.1): rank 0 lists the ranks
# that have not submitted a tensor the others wait on after HOROVOD_STALL_CHECK_TIME_SECONDS
# (default 60) and shuts Horovod down after HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (default 0:
# never). Read from the environment at hvd.init() (horovod/common/operations.cc).
STALL_CHECK = "HOROVOD_STALL_CHECK_TIME_SECONDS"
STALL_SHUTDOWN = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"
CLUSTER_STALL_TIMEOUT_S = 600
# NCCL's communicator set-up (Init START to Init COMPLETE) takes seconds on a healthy cluster; a
# job whose set-up has not completed after this long is hung (a node that never joins).
NCCL_INIT_DEADLINE_S = 600
# The longest a built-in training script may go without an optimizer step on a cluster (the
# epoch's end, validation and a checkpoint included), and the first step's allowance (data,
# cuDNN autotuning, torch.compile).
CLUSTER_PROGRESS_TIMEOUT_S = 900
FIRST_STEP_TIMEOUT_S = 1800
# Measured with Horovod 0.28.1 as this project builds it (2 CPU workers, one stops before an
# allreduce): under mpirun rank 0 printed "Missing ranks: 1: [allreduce.NAME]" and shut down
# after the set times; under `horovodrun --gloo` with the same settings nothing was printed and
# the job hung until killed.
GLOO_HAS_NO_STALL_INSPECTOR = (
    "--stall-timeout needs Horovod's MPI transport: its stall inspector does not fire under "
    "`horovodrun --gloo` (a stalled Gloo job prints nothing and hangs); use --transport mpi, "
    "or leave --transport out (it then picks mpi)"
)
# NCCL's own log of its communicators' set-up, read by training.guard for the init deadline and
# the InfiniBand check (NCCL reads these once per process; the guard drops INFO lines once it has
# what it needs unless the user asked for INFO).
GUARD_NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
# A user's script creates its own process group: its collective timeout is the script's
# (init_process_group(timeout=…); PyTorch's default otherwise), which no environment variable
# changes (torch/distributed/constants.py, torch 2.13.0).
SCRIPT_SETS_ITS_TIMEOUT = (
    "--stall-timeout under torchrun sets the built-in script's collective timeout; your script "
    "sets its own (init_process_group(timeout=...)), which azdl cannot change: leave "
    "--stall-timeout out (docs/torchrun.md, Safeguards)"
)


def stall_environment(seconds: int | None) -> dict[str, str]:
    """Horovod's stall inspector for a timeout of `seconds`: the missing ranks are named at half
    the timeout (at most Horovod's default of 60 s), and Horovod shuts down at the timeout."""
    if seconds is None:
        return {}
    _check_timeout(seconds)
    warn = max(1, min(60, seconds // 2))
    return {STALL_CHECK: str(warn), STALL_SHUTDOWN: str(seconds)}


def guard_command(
    ranks_dir: str,
    *,
    check_infiniband: bool = False,
    nodes: int = 1,
    hcas: int | None = None,
    nccl_debug: str | None = None,
    init_deadline: int | None = None,
    progress_timeout: int | None = None,
    post_mortem_gpus: int | None = None,
    python: str = "python",
) -> list[str]:
    """The prefix that runs a rank's command under training.guard (then `--` and the command).
    `nccl_debug`: the user's level, when the job set NCCL_DEBUG=INFO for the guard;
    `post_mortem_gpus`: the node's GPUs, checked after a failure."""
    cmd = [*module_command("training.guard", python), "--ranks-dir", ranks_dir]
    if check_infiniband:
        cmd += ["--check-infiniband", "--nodes", str(nodes)]
        cmd += ["--hcas", str(hcas)] if hcas else []
    if nccl_debug is not None:
        cmd += ["--nccl-debug", nccl_debug]
    if init_deadline is not None:
        cmd += ["--init-deadline", str(init_deadline)]
    if progress_timeout is not None:
        first = max(FIRST_STEP_TIMEOUT_S, progress_timeout)
        cmd += ["--progress-timeout", str(progress_timeout), "--first-step-timeout", str(first)]
    if post_mortem_gpus:
        cmd += ["--post-mortem-gpus", str(post_mortem_gpus)]
    return [*cmd, "--"]


# What `azdl submit --no-safeguards` leaves out: the guard around each rank (training.guard).
LEFT_OUT = (
    "--no-safeguards: the job runs without azdl's guard around each rank: no rank-to-host or "
    "exit records (--max-retries judges a failure by the log's words alone), no NCCL init "
    "deadline, no InfiniBand transport check, no post-mortem of the GPUs after a failure, no "
    "events, so `azdl jobs ledger` cannot tell the job's training time from the rest; "
    "Horovod's own stall inspector (--stall-timeout) stays"
)
# Why some jobs need the runtime all the same (azdl.jobs.spec.validate).
NEEDS_THE_RUNTIME = {
    "torchrun": "under torchrun, azdl's runtime also starts the nodes (the rendezvous address, "
    "one node's stop ending the others, rank labels): use --launcher horovod",
    "copy": "--storage copy is azdl's runtime copying each node's shards: use mount or nfs",
    "progress": "--progress-timeout is the guard's watchdog",
}


def local_mlflow_uri(run_dir: Path) -> str:
    """MLflow's store for a local run: a SQLite file in the run's folder (MLflow 3's default
    backend; `mlflow ui --backend-store-uri` takes the same URI)."""
    return f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"


def job_safeguards(request, vm_size) -> tuple[dict[str, str], list[str]]:
    """(environment variables, guard prefix) of a cluster job: the stall inspector (under
    torchrun the collective timeout, NCCL watchdog and flight recorder); on GPU sizes NCCL's
    INIT/NET log for the guard's init deadline, Azure's NCCL topology file where the size needs
    one (training.nccl_topology), the post-mortem of the node's GPUs after a failure and, on
    InfiniBand sizes, the transport check; the progress watchdog where the request has a timeout
    for it. `request`: a JobRequest."""
    from training import nccl_topology

    if request.launcher == "torchrun":
        env = collective_environment(request.stall_timeout)
    else:
        env = stall_environment(request.stall_timeout)
    gpu = vm_size.gpus > 0
    if not request.safeguards:  # Horovod's own stall inspector and NCCL's settings only
        return env | (nccl_topology.nccl_environment(vm_size.name) if gpu else {}), []
    check = request.infiniband_check and vm_size.infiniband and gpu
    if gpu:
        env |= nccl_topology.nccl_environment(vm_size.name) | GUARD_NCCL_ENV
    prefix = guard_command(
        "${{outputs.logs}}/ranks",
        check_infiniband=check,
        nodes=request.nodes,
        hcas=vm_size.infiniband_hcas,
        nccl_debug=request.nccl_debug if gpu else None,
        init_deadline=NCCL_INIT_DEADLINE_S if gpu else None,
        progress_timeout=request.progress_timeout,
        post_mortem_gpus=vm_size.gpus if gpu else None,
    )
    return env, prefix


def _check_timeout(seconds: int) -> None:
    if seconds < 2:
        raise AzdlError(f"--stall-timeout {seconds}: expected at least 2 seconds")


# Under torchrun, PyTorch's own machinery (pytorch/pytorch docs/source/
# torch_nccl_environment_variables.md): TORCH_NCCL_ASYNC_ERROR_HANDLING=3 has the NCCL watchdog
# tear the process down when a collective times out (without aborting the communicators, which
# can hang), TORCH_NCCL_DUMP_ON_TIMEOUT=1 makes it dump the flight recorder first (every rank:
# the others see the signal in the store); the buffer holds the last FR_ENTRIES collectives
# (DDP on ResNet50: a few per step).
FR_ENTRIES = 2000


def collective_environment(seconds: int | None, dump_dir: str | None = None) -> dict[str, str]:
    """torchrun's safeguards: the collective timeout of `seconds` that the built-in script's
    process group gets (training.torch.distributed; None: a user's script sets its own), the
    NCCL watchdog, and the flight recorder, dumped into `dump_dir` (rank_0, rank_1, …; a job
    sets it in its command, where its logs folder is known)."""
    env = {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        flight_recorder.BUFFER_ENV: str(FR_ENTRIES),
    }
    if seconds is not None:
        _check_timeout(seconds)
        env[flight_recorder.COLLECTIVE_TIMEOUT_ENV] = str(seconds)
    if dump_dir is not None:
        prefix = f"{dump_dir}/{flight_recorder.DUMP_FILE_PREFIX}"
        env[flight_recorder.DUMP_PREFIX_ENV] = prefix
    return env
