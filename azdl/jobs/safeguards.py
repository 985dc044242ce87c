"""What `azdl train` and `azdl submit` add to a job so that it cannot silently waste time: the
stall timeout (Horovod's stall inspector), the per-rank guard (training.guard: rank → host
records, stalled ranks named, NCCL's transport checked on InfiniBand sizes) and where MLflow
writes locally. No Azure calls, nothing imported from the training stack.
"""

from pathlib import Path

from azdl.errors import AzdlError

# Horovod's stall inspector (horovod/common/stall_inspector.cc, 0.28.1): rank 0 lists the ranks
# that have not submitted a tensor the others wait on after HOROVOD_STALL_CHECK_TIME_SECONDS
# (default 60) and shuts Horovod down after HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (default 0:
# never). Read from the environment at hvd.init() (horovod/common/operations.cc).
STALL_CHECK = "HOROVOD_STALL_CHECK_TIME_SECONDS"
STALL_SHUTDOWN = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"
CLUSTER_STALL_TIMEOUT_S = 600
# Measured with Horovod 0.28.1 as this project builds it (2 CPU workers, one stops before an
# allreduce): under mpirun rank 0 printed "Missing ranks: 1: [allreduce.NAME]" and shut down
# after the set times; under `horovodrun --gloo` with the same settings nothing was printed and
# the job hung until killed.
GLOO_HAS_NO_STALL_INSPECTOR = (
    "--stall-timeout needs the MPI launcher: Horovod's stall inspector does not fire under "
    "`horovodrun --gloo` (a stalled Gloo job prints nothing and hangs); use --launcher mpi, "
    "or leave --launcher out (it then picks mpi)"
)
# NCCL's own log of the first communicator, read by training.guard (NCCL reads these once per
# process; the guard drops later INFO lines unless the user asked for INFO).
IB_CHECK_NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


def stall_environment(seconds: int | None) -> dict[str, str]:
    """Horovod's stall inspector for a timeout of `seconds`: the missing ranks are named at half
    the timeout (at most Horovod's default of 60 s), and Horovod shuts down at the timeout."""
    if seconds is None:
        return {}
    if seconds < 2:
        raise AzdlError(f"--stall-timeout {seconds}: expected at least 2 seconds")
    warn = max(1, min(60, seconds // 2))
    return {STALL_CHECK: str(warn), STALL_SHUTDOWN: str(seconds)}


def guard_command(
    ranks_dir: str,
    *,
    check_infiniband: bool = False,
    nodes: int = 1,
    nccl_debug: str = "WARN",
    python: str = "python",
) -> list[str]:
    """The prefix that runs a rank's command under training.guard (then `--` and the command)."""
    cmd = [python, "-m", "training.guard", "--ranks-dir", ranks_dir]
    if check_infiniband:
        cmd += ["--check-infiniband", "--nodes", str(nodes), "--nccl-debug", nccl_debug]
    return [*cmd, "--"]


def local_mlflow_uri(run_dir: Path) -> str:
    """MLflow's store for a local run: a SQLite file in the run's folder (MLflow 3's default
    backend; `mlflow ui --backend-store-uri` takes the same URI)."""
    return f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"


def job_safeguards(request, vm_size) -> tuple[dict[str, str], list[str]]:
    """(environment variables, guard prefix) of a cluster job: the stall inspector, and on
    InfiniBand GPU sizes NCCL's INIT/NET log for the guard's transport check and Azure's NCCL
    topology file where the size needs one (training.nccl_topology). `request`: a JobRequest."""
    from training import nccl_topology

    env = stall_environment(request.stall_timeout)
    check = request.infiniband_check and vm_size.infiniband and vm_size.gpus > 0
    if vm_size.gpus > 0:
        env |= nccl_topology.nccl_environment(vm_size.name)
    if check:
        env |= IB_CHECK_NCCL_ENV
    prefix = guard_command(
        "${{outputs.logs}}/ranks",
        check_infiniband=check,
        nodes=request.nodes,
        nccl_debug=request.nccl_debug,
    )
    return env, prefix
