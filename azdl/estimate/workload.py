"""What is trained: images × epochs of a built-in model, and the size of its gradients."""

import re
from dataclasses import dataclass

from azdl.errors import AzdlError

DEFAULT_EPOCHS = 90  # the ResNet50 v1.5 recipe's length (docs/recipe.md)
GRADIENT_BYTES_PER_PARAM = 4  # Horovod all-reduces fp32 gradients unless compression is asked for


@dataclass(frozen=True)
class Model:
    name: str
    parameters: int
    source: str

    @property
    def gradient_bytes(self) -> int:
        return self.parameters * GRADIENT_BYTES_PER_PARAM


# Trainable parameters of the models `--model` names (training/options.py MODELS).
MODELS = {
    "resnet50": Model(
        "resnet50",
        25_557_032,
        "ResNet50 v1.5 with 1000 classes, as torchvision publishes it (pytorch/vision, "
        "torchvision/models/resnet.py, ResNet50_Weights.IMAGENET1K_V1 meta `num_params`)",
    ),
    "tiny": Model(
        "tiny",
        38_088,
        "training/torch/torch_models.py `tiny` with 1000 classes: 448 + 4,640 + 33,000",
    ),
}


@dataclass(frozen=True)
class Workload:
    model: Model
    images: int
    epochs: float

    @property
    def total_images(self) -> float:
        return self.images * self.epochs

    @property
    def label(self) -> str:
        return f"{self.model.name}, {self.images:,} images × {self.epochs:g} epochs"


DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([mhd]?)\s*")
UNIT_HOURS = {"m": 1 / 60, "h": 1.0, "": 1.0, "d": 24.0}


def parse_duration(text: str) -> float:
    """Hours in `text`: a number with m, h (the default) or d, e.g. 90m, 8h, 2d, 1.5d."""
    match = DURATION.fullmatch(text)
    if not match:
        raise AzdlError(
            f"--deadline {text!r}: expected a duration such as 90m, 8h or 2d (m, h or d)"
        )
    hours = float(match.group(1)) * UNIT_HOURS[match.group(2)]
    if hours <= 0:
        raise AzdlError(f"--deadline {text!r}: expected a duration above 0")
    return hours
