"""The Azure ML command job of one training run, built from the stack outputs once `validate` has
passed; no Azure calls. A built-in script's job and a user's script's job are two siblings
(`azdl.jobs.builtin_job`, `azdl.jobs.script_job`) behind one branch, `kind_of`; its workers
start under Azure ML's MPI (Horovod) or one torchrun per node (`distribution: pytorch`)."""

import re
import shlex
from types import ModuleType

from azdl.errors import AzdlError
from azdl.estimate.job_tags import estimate_tags
from azdl.jobs import (
    budget,
    builtin_job,
    health,
    node_mtbf,
    own_environment,
    safeguards,
    script_job,
)
from azdl.jobs.azureml import (
    command_job,
    data_input,
    nccl_environment,
    nfs_docker_args,
    output_folder,
    processes_per_node,
)
from azdl.jobs.request import STORAGE_MODES, JobPart, JobRequest
from azdl.jobs.stack_outputs import StackOutputs
from azdl.launchers import LAUNCHERS, TORCHRUN_ENV, labelled, node_torchrun
from azdl.runtime import module_command
from training import events, flight_recorder, job_stop, live
from training.flavours import FRAMEWORKS

# A job name as it appears in the outputs container's folders (Azure ML job names are letters,
# digits, '-' and '_').
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}")


def kind_of(request: JobRequest) -> ModuleType:
    """The sibling that checks and builds this kind of job: a user's script, or a built-in."""
    return script_job if request.script is not None else builtin_job


def validate(outputs: StackOutputs, request: JobRequest) -> None:
    """Every check of a request that can fail before Azure is called."""
    if request.health_check:
        health.require_gpus(outputs)
        if request.environment is not None:
            raise AzdlError(health.NOT_IN_OWN_ENVIRONMENT)
    if request.framework not in FRAMEWORKS:
        raise AzdlError(
            f"unknown framework {request.framework!r}; allowed: {', '.join(FRAMEWORKS)}"
        )
    if not 1 <= request.nodes <= outputs.max_nodes:
        raise AzdlError(
            f"--nodes {request.nodes} is not possible on cluster {outputs['clusterName']!r} "
            f"({outputs.source}): allowed 1 to its maximum of {outputs.max_nodes} nodes "
            "(clusterMaxNodes; raise cluster.maxNodes in the stack to go further)"
        )
    if request.storage not in STORAGE_MODES:
        raise AzdlError(
            f"unknown storage mode {request.storage!r}; allowed: {', '.join(STORAGE_MODES)}"
        )
    if request.storage == "nfs" and outputs.nfs_mount_target is None:
        raise AzdlError(
            f"--storage nfs: {outputs.source} has no NFS share (nfsMountTarget is null); "
            "use mount or copy, or set storage.nfsShareGiB in the stack and deploy it"
        )
    if request.launcher not in LAUNCHERS:
        raise AzdlError(f"unknown launcher {request.launcher!r}; allowed: {', '.join(LAUNCHERS)}")
    if request.max_restarts and request.launcher != "torchrun":
        raise AzdlError(
            "--max-restarts is torchrun's: Azure ML's MPI restarts no process (use --launcher "
            "torchrun, or --max-retries to resubmit the job)"
        )
    if request.resume_from is not None and not _JOB_NAME.fullmatch(request.resume_from):
        raise AzdlError(
            f"--resume-from {request.resume_from!r}: expected the name of an earlier job "
            "(letters, digits, '-' and '_')"
        )
    if not request.safeguards:
        _check_without_safeguards(request)
    kind_of(request).check(outputs, request)


def _check_without_safeguards(request: JobRequest) -> None:
    """--no-safeguards: on an own environment only, and not for jobs that need the runtime."""
    if request.environment is None:
        raise AzdlError(
            "--no-safeguards goes with --environment: azdl's image has the guard, so keep it"
        )
    reasons = safeguards.NEEDS_THE_RUNTIME
    why = (
        reasons["torchrun"] if request.launcher == "torchrun"
        else reasons["copy"] if request.storage == "copy"
        else reasons["progress"] if request.progress_timeout is not None
        else None
    )  # fmt: skip
    if why is not None:
        raise AzdlError(f"--no-safeguards: {why}; or install the azdl runtime into the "
                        'environment and leave --no-safeguards out (docs/jobs.md, "Your own '
                        'environment")')  # fmt: skip


def warnings(request: JobRequest) -> list[str]:
    """What is allowed but most likely a mistake."""
    found = []
    if request.storage != "synthetic" and not request.data_path:
        found.append(
            f"no --data-path: the job reads the shards from the root of the "
            f"{'NFS share' if request.storage == 'nfs' else 'data container'}"
        )
    # --requirements without --wheels on a restricted stack is refused, not warned about
    # (azdl.jobs.script_job: pip on the nodes cannot reach a package index there).
    if request.script is not None:
        found += script_job.warnings(request)
    return found


def threads_per_process(outputs: StackOutputs) -> int:
    """Each process's share of the node's vCPUs. Passed as --threads because mpirun may pin
    ranks to a socket or core, and a rank cannot tell its share from its own affinity."""
    return max(1, outputs.vm_size.vcpus // processes_per_node(outputs))


def job_part(request: JobRequest, threads: int, guard: list[str] = ()) -> JobPart:
    """What the request's kind adds to the job (its steps, worker command, outputs, ...)."""
    return kind_of(request).part(request, threads, list(guard))


# Where torchrun jobs' flight-recorder dumps go (a folder every node writes: the job's logs),
# and how long a node waits for the other nodes' dumps to appear there before it names ranks.
DUMPS = "${{outputs.logs}}/flight-recorder"
DUMP_WAIT_S = 60
# Where a node of a torchrun job writes a stop that every restart would repeat (training.job_stop).
STOPS = "${{outputs.logs}}/stops"
# Where rank 0 writes the run's events (training.events), read by `azdl jobs ledger`.
EVENTS = "${{outputs.logs}}/events"


def events_step() -> str:
    """The job's first step: the events' folder for every process, and node 0's `up` event,
    where the ledger's startup begins (before the gate and the pip step)."""
    up = shlex.join([*module_command("training.events"), "up"])
    return f"export {events.DIR_ENV}={shlex.quote(EVENTS)} && {up}"


def workers_command(request: JobRequest, part: JobPart, per_node: int) -> str:
    """The shell command that starts the workers: under MPI, every process runs the worker's
    steps and command; under torchrun, each node's process starts torchrun with them (the
    flight recorder's folder first; after a failure, the ranks its dumps show kept the others
    waiting)."""
    worker = shlex.join(part.worker)
    if request.launcher != "torchrun":
        return " && ".join([*part.before_training, worker])
    if part.before_training:  # run by each worker, which torchrun starts without a shell
        worker = shlex.join(["bash", "-c", " && ".join([*part.before_training, f"exec {worker}"])])
    worker = f"{shlex.join(labelled())} {worker}"  # each line whole, labelled with its rank
    prefix = f"{DUMPS}/{flight_recorder.DUMP_FILE_PREFIX}"
    report = shlex.join([
        *module_command("training.flight_recorder"), prefix,
        f"--world-size={request.nodes * per_node}", "--ranks-dir=${{outputs.logs}}/ranks",
        f"--wait={DUMP_WAIT_S}",
    ])  # fmt: skip
    torchrun = node_torchrun(request.nodes, per_node, request.max_restarts, request.run_id)
    return (
        f"export {flight_recorder.DUMP_PREFIX_ENV}={shlex.quote(prefix)} "
        f"{job_stop.STOP_DIR_ENV}={shlex.quote(STOPS)} && "
        f"mkdir -p {shlex.quote(DUMPS)} && "
        f"{{ {torchrun} {worker} || {{ code=$?; {report}; exit $code; }}; }}"
    )


def gate_step(outputs: StackOutputs, request: JobRequest) -> str:
    """The health gate; under torchrun, a node whose gate fails writes a stop, which ends the
    other nodes' torchrun (waiting in the rendezvous for it) at once."""
    gate = health.gate_step(outputs, request.nodes)
    if request.launcher != "torchrun":  # mpirun ends every process when one fails
        return gate
    stop = shlex.join([*module_command("training.job_stop"), "write", STOPS, "--exit", "1",
                       "--why", "its health gate failed (azdl-health: FAIL above)"])  # fmt: skip
    return f"{{ {gate} || {{ {stop}; exit 1; }}; }}"


def training_command(request: JobRequest, threads: int, guard=(), per_node: int = 1) -> str:
    """The shell command of the job (each MPI process, or each node under torchrun), the
    training under `guard` (safeguards.job_safeguards)."""
    part = job_part(request, threads, guard)
    return " && ".join([*part.steps, workers_command(request, part, per_node)])


def time_limit(outputs: StackOutputs, request: JobRequest) -> budget.TimeLimit:
    """The job's `limits.timeout`: --timeout, what --max-cost buys, or the default."""
    return budget.time_limit(
        outputs, request.nodes, request.timeout, request.max_cost, request.spent_usd
    )


def build_job(outputs: StackOutputs, request: JobRequest):
    """The azure-ai-ml command job for `request` (validated first, before azure-ai-ml loads)."""
    validate(outputs, request)
    from azure.ai.ml import MpiDistribution, PyTorchDistribution

    limit = time_limit(outputs, request)
    threads = threads_per_process(outputs)
    per_node = processes_per_node(outputs)
    guards, guard = safeguards.job_safeguards(request, outputs.vm_size)
    part = job_part(request, threads, guard)
    if request.launcher == "torchrun":  # Azure ML starts one process per node: torchrun
        distribution = PyTorchDistribution(process_count_per_instance=1)
        guards |= TORCHRUN_ENV
    else:  # one MPI process per GPU
        distribution = MpiDistribution(process_count_per_instance=per_node)
    inputs = {}
    if request.storage in ("mount", "copy"):
        inputs["data"] = data_input(outputs, request.data_path)
    names = ("checkpoints", "logs", *part.outputs)
    names += (health.OUTPUT,) if request.health_check else ()
    # --resume-from: checkpoints go to (and resume from) the earlier job's folder.
    folder_of = {"checkpoints": request.resume_from or request.run_id}
    job_outputs = {
        name: output_folder(outputs, request.experiment, folder_of.get(name, request.run_id), name)
        for name in names
    }
    tags = {
        "azdl.framework": request.framework,
        "azdl.nodes": str(request.nodes),
        "azdl.storage": request.storage,
        "azdl.launcher": request.launcher,
    }
    if request.resume_from:
        tags["azdl.resume_from"] = request.resume_from
    if request.health_check:
        tags["azdl.health_check"] = "true"
    rate, _note = budget.hourly_rate(outputs, request.nodes)
    rated = {}
    if rate is not None:
        tags[budget.RATE_TAG] = f"{rate:g}"
        rated = {live.RATE_ENV: f"{rate:g}"}  # rank 0's live.cost_usd in MLflow
    if request.max_cost is not None:
        tags[budget.MAX_COST_TAG] = f"{request.max_cost:g}"
    if request.script is None:  # a user's script trains what the estimate cannot know
        model = builtin_job.parse_training_args(request.framework, request.training_args).model
        tags |= estimate_tags(outputs.vm_size, request.nodes, model)
    command = " && ".join(
        ([events_step()] if request.safeguards else [])  # training.events is the runtime's
        + ([gate_step(outputs, request)] if request.health_check else [])
        + [*part.steps, workers_command(request, part, per_node)]
    )
    environment = outputs.environment(request.framework)
    if request.environment is not None:  # the team's own: its azdl runtime checked first
        runtime = own_environment.runtime_modules(command)
        first = [own_environment.probe_step(command)] if runtime else []
        if "NCCL_TOPO_FILE" in guards:  # a file of azdl's images (training.nccl_topology)
            first.append(own_environment.topology_step(guards["NCCL_TOPO_FILE"]))
        command = " && ".join([*first, command])
        environment = own_environment.azureml_reference(request.environment)
        tags["azdl.environment"] = request.environment
    return command_job(
        outputs,
        request.run_id,
        request.experiment,
        description=f"azdl {part.what}, {request.nodes} node(s), {request.storage} data",
        command=command,
        code=part.code,
        environment=environment,
        instance_count=request.nodes,
        distribution=distribution,
        inputs=inputs,
        outputs=job_outputs,
        environment_variables=nccl_environment(outputs, request.nccl_debug)
        | guards
        | part.environment
        | node_mtbf.environment(request.node_mtbf_h)
        | rated,
        shm_size=request.shm_size,
        docker_args=(
            nfs_docker_args(outputs.nfs_mount_target) if request.storage == "nfs" else None
        ),
        tags=tags | part.tags,
        timeout=limit.seconds,
    )
