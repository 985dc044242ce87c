"""A job of a user's own script (`azdl submit --script`): its code folder checked and uploaded,
its requirements installed once per node, its folders handed over as `azdl.jobs.script` says."""

import shlex
from pathlib import Path

from azdl.errors import AzdlError
from azdl.jobs import code_folder
from azdl.jobs import script as own_script
from azdl.jobs.request import JobPart, JobRequest, OwnScript, copy_step, data_folder
from azdl.jobs.stack_outputs import StackOutputs
from azdl.launchers import PIP_TIMEOUT_S
from azdl.paths import existing_file, folder_or_nothing
from azdl.runtime import module_command

# On a user's script's job: the script, relative to its folder.
SCRIPT_TAG = "azdl.script"


def check(outputs: StackOutputs, request: JobRequest) -> None:
    """The script, its requirements and wheels are inside the code folder and uploaded (not
    left out by its ignore file); the folder is within Azure ML's limits; every placeholder in
    the arguments has a folder in this job."""
    script = request.script
    folder_or_nothing(script.code_dir, "--code", "the folder to upload as the job's code")
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
        if path is not None:
            existing_file(path, what, f"a file ({what} FILE)")
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
        folder_or_nothing(script.wheels, "--wheels", "a folder of *.whl files")
        if not script.wheels.is_dir() or not any(script.wheels.glob("*.whl")):
            raise AzdlError(f"--wheels {script.wheels}: no such folder, or no *.whl files in it")
        if not folder.has_folder(script.wheels):
            raise AzdlError(f"--wheels {script.wheels} is {ignored}; the job could not install")
    own_script.substitute(request.training_args, script_folders(request))


def warnings(request: JobRequest) -> list[str]:
    """What is allowed but most likely fails, or may: the script imports a module of azdl's
    runtime package that a `training` package of its own, beside it, shadows; it destroys its
    process group where its DDP model still holds it (own_script.teardown_hazards)."""
    import training

    script = request.script.path
    hazards = own_script.teardown_hazards(script)
    missing = own_script.shadowed_imports(script, Path(training.__file__).parent)
    if not missing:
        return hazards
    return [
        *hazards,
        f"{script.name} imports {', '.join(missing)} from azdl's runtime, but its folder has a "
        "training/ package of its own, which it finds first and which has no such module: the "
        "job would stop at that import; rename your package (azdl's own steps are not affected)",
    ]


def script_folders(request: JobRequest) -> dict[str, str | None]:
    """A script job's folders, as placeholders Azure ML fills in before the command runs."""
    return {
        "data_dir": data_folder(request),
        "checkpoint_dir": "${{outputs.checkpoints}}",
        "log_dir": "${{outputs.logs}}",
        "output_dir": "${{outputs.outputs}}",
    }


# Once per node: local rank 0 installs, the node's other ranks wait for its verdict (under
# torchrun the node's one process, before its workers start). The markers live in the job's own
# container (a fresh /tmp per job on Azure ML).
_PIP_MARKER = "${TMPDIR:-/tmp}/azdl-pip-${AZUREML_RUN_ID:-local}"
_LOCAL_RANK = "${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}"


def install_step(script: OwnScript) -> list[str]:
    """`pip install -r REQUIREMENTS` once per node before training (from the wheel folder only,
    when there is one), failing the job if it fails or runs past PIP_TIMEOUT_S (the skew the
    nodes' torchrun rendezvous allows for, azdl.launchers)."""
    if script.requirements is None:
        return []
    pip = [*module_command("pip"), "install", "--no-cache-dir", "--disable-pip-version-check"]
    if script.wheels is not None:
        pip += ["--no-index", "--find-links", script.relative(script.wheels)]
    pip += ["-r", script.relative(script.requirements)]
    ok, failed = f'"{_PIP_MARKER}.ok"', f'"{_PIP_MARKER}.failed"'
    why = shlex.quote(f"azdl: pip install failed, or ran past its {PIP_TIMEOUT_S} s")
    return [
        f'if [ "{_LOCAL_RANK}" = 0 ]; then timeout {PIP_TIMEOUT_S} {shlex.join(pip)} && touch {ok} '
        f"|| {{ echo {why} >&2; touch {failed}; }}; "
        f"else while [ ! -e {ok} ] && [ ! -e {failed} ]; do sleep 1; done; fi",
        f"[ -e {ok} ]",
    ]


def part(request: JobRequest, threads: int, guard: list[str]) -> JobPart:
    """The script's folders exported and substituted into its arguments, the install step, then
    each worker's copy step and `python FILE ARGS` under `guard` in the uploaded code folder;
    `threads`, each process's share of the node's cores, for the script and its thread
    pools."""
    script = request.script
    folders = script_folders(request)
    env = own_script.folder_environment(folders)
    export = "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
    args = own_script.substitute(request.training_args, folders)
    relative = script.relative(script.path)
    return JobPart(
        steps=(export, *install_step(script)),
        worker=(*guard, "python", relative, *args),
        before_training=tuple(copy_step(request)),
        what=f"job of {relative} ({request.framework} image)",
        outputs=("outputs",),
        environment={own_script.THREADS_ENV: str(threads), "OMP_NUM_THREADS": str(threads)},
        tags={SCRIPT_TAG: relative},
        code=str(script.code_dir),
    )
