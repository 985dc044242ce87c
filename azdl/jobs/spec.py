"""The Azure ML command job for one Horovod run, built from the stack outputs; no Azure calls.

One MPI process per GPU (the VM-size catalogue says how many a node has; one per node on CPU
sizes), `nodes` instances, the stack's environment for the framework's image, data in one of
the storage modes, checkpoints and TensorBoard logs in the outputs container, and NCCL settings
for the cluster's network. Data and outputs are addressed through the stack's identity-based
datastores (`azureml://datastores/<name>/paths/<path>`, the URIs Azure ML job inputs and
outputs take). Everything is checked before a job object exists.

A job of a user's own script (`OwnScript`) uploads the script's folder as the job's `code:` and
runs `python FILE ARGS` there in every MPI process, with the same image, data, NCCL and shared
memory settings; its folders reach it as `azdl.jobs.script` describes (AZDL_* variables, {…}
placeholders), and a requirements file is installed once per node before it starts.
"""

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from azdl.errors import AzdlError
from azdl.jobs import code_folder, health, safeguards
from azdl.jobs import script as own_script
from azdl.jobs.azureml import (
    NFS_MOUNT_POINT,
    command_job,
    data_input,
    nccl_environment,
    nfs_docker_args,
    output_folder,
    processes_per_node,
)
from azdl.jobs.stack_outputs import StackOutputs
from training.flavours import FRAMEWORKS, entry_module

# synthetic: no data input; mount: the data container read-only mounted (blob);
# nfs: the stack's NFS share; copy: blob mount, then each node copies its shards to local disk.
STORAGE_MODES = ("synthetic", "mount", "nfs", "copy")
# The container's own file system sits on the node's local disk on AmlCompute.
DEFAULT_LOCAL_DIR = "/tmp/azdl-data"
# Options `submit` sets itself from the storage mode and the outputs account.
RESERVED_OPTIONS = ("--data-dir", "--checkpoint-dir", "--log-dir")
# A job name as it appears in the outputs container's folders (Azure ML job names are letters,
# digits, '-' and '_').
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}")
# Training options that only make sense with GPUs (fp16 compute and fp16 gradient exchange).
GPU_ONLY = {"precision": ("fp16",), "fp16_allreduce": (True,)}


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
    timeout: int | None = None  # Azure ML's limit on the job's run time, seconds
    infiniband_check: bool = True  # on InfiniBand GPU sizes: NCCL must use IB (+ GDR across nodes)


def validate(outputs: StackOutputs, request: JobRequest) -> None:
    """Every check that can fail before Azure is called."""
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
    if request.resume_from is not None and not _JOB_NAME.fullmatch(request.resume_from):
        raise AzdlError(
            f"--resume-from {request.resume_from!r}: expected the name of an earlier job "
            "(letters, digits, '-' and '_')"
        )
    if request.script is not None:
        validate_script(request, outputs)
        return
    for option in RESERVED_OPTIONS:
        if _has_option(request.training_args, option):
            raise AzdlError(
                f"{option} is set by submit (from --storage and the outputs account); "
                "leave it out of the training options"
            )
    parsed = parse_training_args(request.framework, request.training_args)
    if outputs.vm_size.gpus == 0:
        for name, bad_values in GPU_ONLY.items():
            if getattr(parsed, name, None) in bad_values:
                flag = "--" + name.replace("_", "-")
                raise AzdlError(
                    f"{flag} needs GPUs, but cluster {outputs['clusterName']!r} runs "
                    f"{outputs.vm_size.name}, a CPU size (gpus: 0 in infra/vm_sizes.yaml); "
                    "drop the option or deploy a GPU size"
                )


def validate_script(request: JobRequest, outputs: StackOutputs) -> None:
    """The script, its requirements and wheels are inside the code folder and uploaded (not
    left out by its ignore file); the folder is within Azure ML's limits; every placeholder in
    the arguments has a folder in this job."""
    script = request.script
    if not script.code_dir.is_dir():
        raise AzdlError(f"--code {script.code_dir}: no such folder")
    for what, path in (("--script", script.path), ("--requirements", script.requirements),
                       ("--wheels", script.wheels)):  # fmt: skip
        if path is not None and not path.is_relative_to(script.code_dir):
            raise AzdlError(
                f"{what} {path} is outside the code folder {script.code_dir}, which is all the "
                "job gets; move it in, or name a wider folder with --code"
            )
    folder = code_folder.check(script.code_dir)
    ignored = (
        f"left out of the upload by {folder.ignore_file}" if folder.ignore_file else "not uploaded"
    )
    for what, path in (("--script", script.path), ("--requirements", script.requirements)):
        if path is not None and not path.is_file():
            raise AzdlError(f"{what} {path}: no such file")
        if path is not None and not folder.has(path):
            raise AzdlError(f"{what} {path} is {ignored}; the job could not run it")
    if script.requirements is not None and script.wheels is None and outputs.internet_denied:
        raise AzdlError(
            f"--requirements {script.requirements} without --wheels: the training subnet of "
            f"{outputs.source} denies the internet (network.outbound: restricted), so pip "
            "cannot reach PyPI. Download the wheels where the internet is reachable (pip "
            "download -r FILE -d wheels, inside the code folder) and pass --wheels wheels, or "
            "bake the packages into the image (docs/access.md, Packages from the internet)"
        )
    if script.wheels is not None:
        if script.requirements is None:
            raise AzdlError("--wheels needs --requirements: the file that says what to install")
        if not script.wheels.is_dir() or not any(script.wheels.glob("*.whl")):
            raise AzdlError(f"--wheels {script.wheels}: no such folder, or no *.whl files in it")
        if not folder.has_folder(script.wheels):
            raise AzdlError(f"--wheels {script.wheels} is {ignored}; the job could not install")
    own_script.substitute(request.training_args, script_folders(request))


def parse_training_args(framework: str, args: tuple[str, ...]):
    """The training script's own parser checks the options here, before anything is submitted."""
    from training.options import build_parser

    try:
        return build_parser(framework).parse_args(list(args))
    except SystemExit as exc:
        if exc.code == 0:  # --help was asked for and printed
            raise
        raise AzdlError(
            f"the {framework} training script rejects the options {shlex.join(args)!r} "
            "(its message is above)"
        ) from None


def threads_per_process(outputs: StackOutputs) -> int:
    """Each process's share of the node's vCPUs. Passed as --threads because mpirun may pin
    ranks to a socket or core, and a rank cannot tell its share from its own affinity."""
    return max(1, outputs.vm_size.vcpus // processes_per_node(outputs))


def _has_option(args: tuple[str, ...], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in args)


def data_folder(request: JobRequest) -> str | None:
    """Where the processes find the data (an Azure ML placeholder for the blob mount)."""
    return {
        "synthetic": None,
        "mount": "${{inputs.data}}",
        "copy": request.local_dir,
        "nfs": f"{NFS_MOUNT_POINT}/{request.data_path}".rstrip("/"),
    }[request.storage]


def copy_step(request: JobRequest) -> list[str]:
    """The node-side copy to local disk (--storage copy; it coordinates per node itself)."""
    if request.storage != "copy":
        return []
    copy = ["python", "-m", "training.data.copy_shards", "--source", "${{inputs.data}}"]
    return [shlex.join([*copy, "--dest", request.local_dir])]


def script_folders(request: JobRequest) -> dict[str, str | None]:
    """A script job's folders, as placeholders Azure ML fills in before the command runs."""
    return {
        "data_dir": data_folder(request),
        "checkpoint_dir": "${{outputs.checkpoints}}",
        "log_dir": "${{outputs.logs}}",
        "output_dir": "${{outputs.outputs}}",
    }


# Once per node: local rank 0 installs, the node's other ranks wait for its verdict. The
# markers live in the job's own container (a fresh /tmp per job on Azure ML).
_PIP_MARKER = "${TMPDIR:-/tmp}/azdl-pip-${AZUREML_RUN_ID:-local}"
_LOCAL_RANK = "${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}"


def install_step(script: OwnScript) -> list[str]:
    """`pip install -r REQUIREMENTS` once per node before training (from the wheel folder only,
    when there is one), failing the job if it fails."""
    if script.requirements is None:
        return []
    pip = ["python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"]
    if script.wheels is not None:
        pip += ["--no-index", "--find-links", script.relative(script.wheels)]
    pip += ["-r", script.relative(script.requirements)]
    ok, failed = f'"{_PIP_MARKER}.ok"', f'"{_PIP_MARKER}.failed"'
    return [
        f'if [ "{_LOCAL_RANK}" = 0 ]; then {shlex.join(pip)} && touch {ok} || touch {failed}; '
        f"else while [ ! -e {ok} ] && [ ! -e {failed} ]; do sleep 1; done; fi",
        f"[ -e {ok} ]",
    ]


def script_command(request: JobRequest, guard: list[str] = ()) -> str:
    """The shell command every MPI process of a script job runs (the script under `guard`)."""
    script = request.script
    folders = script_folders(request)
    env = own_script.folder_environment(folders)
    export = "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
    args = own_script.substitute(request.training_args, folders)
    run = shlex.join([*guard, "python", script.relative(script.path), *args])
    return " && ".join([export, *copy_step(request), *install_step(script), run])


def training_command(request: JobRequest, threads: int, guard: list[str] = ()) -> str:
    """The shell command every MPI process runs (the copy step coordinates per node itself);
    `threads` unless the training options name --threads themselves; the training itself under
    `guard` (safeguards.job_safeguards)."""
    if request.script is not None:
        return script_command(request, guard)
    steps = copy_step(request)
    data_dir = data_folder(request)
    train = [*guard, "python", "-m", entry_module(request.framework), *request.training_args]
    if not _has_option(request.training_args, "--threads"):
        train += ["--threads", str(threads)]
    if data_dir is not None:
        train += ["--data-dir", data_dir]
    train += ["--checkpoint-dir", "${{outputs.checkpoints}}", "--log-dir", "${{outputs.logs}}"]
    return " && ".join([*steps, shlex.join(train)])


def build_job(outputs: StackOutputs, request: JobRequest):
    """The azure-ai-ml command job for `request` (validated first)."""
    from azure.ai.ml import MpiDistribution

    validate(outputs, request)
    inputs = {}
    if request.storage in ("mount", "copy"):
        inputs["data"] = data_input(outputs, request.data_path)
    names = ("checkpoints", "logs") + (("outputs",) if request.script else ())
    names += (health.OUTPUT,) if request.health_check else ()
    # --resume-from: checkpoints go to (and resume from) the earlier job's folder.
    folder_of = {"checkpoints": request.resume_from or request.run_id}
    job_outputs = {
        name: output_folder(outputs, request.experiment, folder_of.get(name, request.run_id), name)
        for name in names
    }
    threads = threads_per_process(outputs)
    env = nccl_environment(outputs, request.nccl_debug)
    guards, guard = safeguards.job_safeguards(request, outputs.vm_size)
    env |= guards
    tags = {
        "azdl.framework": request.framework,
        "azdl.nodes": str(request.nodes),
        "azdl.storage": request.storage,
    }
    if request.resume_from:
        tags["azdl.resume_from"] = request.resume_from
    if request.health_check:
        tags["azdl.health_check"] = "true"
    what = f"{request.framework} Horovod job"
    if request.script is not None:
        # each process's share of the node's cores, for the script and its thread pools
        env |= {own_script.THREADS_ENV: str(threads), "OMP_NUM_THREADS": str(threads)}
        tags["azdl.script"] = request.script.relative(request.script.path)
        what = f"job of {tags['azdl.script']} ({request.framework} image)"
    return command_job(
        outputs,
        request.run_id,
        request.experiment,
        description=f"azdl {what}, {request.nodes} node(s), {request.storage} data",
        command=" && ".join(
            ([health.gate_step(outputs, request.nodes)] if request.health_check else [])
            + [training_command(request, threads, guard)]
        ),
        code=str(request.script.code_dir) if request.script else None,
        environment=outputs.environment(request.framework),
        instance_count=request.nodes,
        distribution=MpiDistribution(process_count_per_instance=processes_per_node(outputs)),
        inputs=inputs,
        outputs=job_outputs,
        environment_variables=env,
        shm_size=request.shm_size,
        docker_args=(
            nfs_docker_args(outputs.nfs_mount_target) if request.storage == "nfs" else None
        ),
        tags=tags,
        timeout=request.timeout,
    )
