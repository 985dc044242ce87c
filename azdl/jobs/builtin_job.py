"""A job of a built-in training script (`azdl submit --framework`): its options checked by the
script's own parser, and the command that runs its entry module."""

import shlex

from azdl.errors import AzdlError
from azdl.jobs.request import JobPart, JobRequest, copy_step, data_folder
from azdl.jobs.stack_outputs import StackOutputs
from training.flavours import FLAVOURS, entry_module, runs_under

# Options `submit` sets itself from the storage mode and the outputs account.
RESERVED_OPTIONS = ("--data-dir", "--checkpoint-dir", "--log-dir")
# Training options that only make sense with GPUs (fp16 compute and fp16 gradient exchange).
GPU_ONLY = {"precision": ("fp16",), "fp16_allreduce": (True,)}


def check(outputs: StackOutputs, request: JobRequest) -> None:
    """The flavour runs under the launcher; no option submit sets itself; the training
    script's parser accepts the options; no GPU-only option on a CPU size."""
    if not runs_under(request.framework, request.launcher):
        can = [f.name for f in FLAVOURS.values() if runs_under(f.name, request.launcher)]
        raise AzdlError(
            f"the {request.framework} flavour runs under Horovod only (training/flavours.py); "
            f"--launcher {request.launcher} runs --framework {' or '.join(can)}, or your own "
            "--script"
        )
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


def _has_option(args: tuple[str, ...], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in args)


def part(request: JobRequest, threads: int, guard: list[str]) -> JobPart:
    """Each worker copies its node's shards (--storage copy), then runs the entry module under
    `guard` with its folders, and `threads` unless the training options name --threads
    themselves."""
    data_dir = data_folder(request)
    train = [*guard, "python", "-m", entry_module(request.framework), *request.training_args]
    if not _has_option(request.training_args, "--threads"):
        train += ["--threads", str(threads)]
    if data_dir is not None:
        train += ["--data-dir", data_dir]
    train += ["--checkpoint-dir", "${{outputs.checkpoints}}", "--log-dir", "${{outputs.logs}}"]
    how = "under torchrun" if request.launcher == "torchrun" else "Horovod job"
    return JobPart(
        steps=(), worker=tuple(train), before_training=tuple(copy_step(request)),
        what=f"{request.framework} {how}",
    )  # fmt: skip
