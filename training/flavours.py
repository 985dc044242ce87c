"""The training flavours: one row per `--framework` name, the one table every part of azdl reads
(`azdl train|submit|bench`, the jobs' commands, the images, the tests)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Flavour:
    name: str  # `--framework NAME`
    entry_module: str  # `python -m ENTRY_MODULE` runs it
    image: str  # the training image it runs in (images/<image>/Dockerfile)
    launchers: tuple[str, ...]  # how its workers can be started: horovod, torchrun


FLAVOURS = {
    f.name: f
    for f in (
        Flavour("keras", "training.tensorflow.train_keras", "tensorflow", ("horovod",)),
        Flavour("tf", "training.tensorflow.train_loop", "tensorflow", ("horovod",)),
        Flavour("torch", "training.torch.train", "pytorch", ("horovod", "torchrun")),
    )
}
FRAMEWORKS = tuple(FLAVOURS)
DEFAULT_FRAMEWORK = "keras"
IMAGES = tuple(dict.fromkeys(f.image for f in FLAVOURS.values()))


def entry_module(framework: str) -> str:
    return FLAVOURS[framework].entry_module


def runs_under(framework: str, launcher: str) -> bool:
    """Whether the flavour's workers can be started by `launcher` (horovod or torchrun)."""
    return launcher in FLAVOURS[framework].launchers
