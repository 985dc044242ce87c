"""The ImageNet recipes (`--recipe goyal|nvidia`, with the source of every value), how they fill
the options, and the recipe line rank 0 prints. Each framework applies the weight decay and the
label-smoothed loss in its own module (training.tensorflow.keras_loss, training.torch.torch_loss);
the card is docs/recipe.md, the reasons docs/architecture.md ("Recipe").
"""

import argparse
import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Recipe:
    """The hyperparameters `--recipe` sets (each option given on its own still wins)."""

    base_lr: float  # per --base-batch (256) images; scaled linearly with the global batch
    momentum: float
    weight_decay: float
    label_smoothing: float
    warmup_epochs: float
    lr_decay: str
    source: str


RECIPES = {
    # Goyal et al. 2017, "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour" (arXiv
    # 1706.02677): 0.1 per 256 images scaled linearly (§2.1), 5 epochs of gradual warm-up
    # (§2.2), momentum 0.9 and weight decay 1e-4 on all but batch-norm γ/β, ÷10 at epochs 30,
    # 60, 80 (§5.1). Label smoothing is not theirs: 0.1 as in NVIDIA's recipe below.
    "goyal": Recipe(
        base_lr=0.1,
        momentum=0.9,
        weight_decay=1e-4,
        label_smoothing=0.1,
        warmup_epochs=5.0,
        lr_decay="step",
        source="Goyal et al. 2017 (arXiv 1706.02677 §2, §5.1), plus label smoothing 0.1",
    ),
    # NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/configs.yml (commit
    # 097c7ff9, read 2026-11-24), `resnet_params` + `resnet_params_2k` used by resnet50: lr
    # 2.048 at optimizer_batch_size 2048 (= 0.256 per 256), momentum 0.875, weight_decay
    # 3.0517578125e-05, lr_schedule cosine, warmup 8, label_smoothing 0.1. Its mixup 0.2 and
    # 250 epochs are not part of this recipe (no mixup here; --epochs stays 90).
    "nvidia": Recipe(
        base_lr=0.256,
        momentum=0.875,
        weight_decay=3.0517578125e-05,
        label_smoothing=0.1,
        warmup_epochs=8.0,
        lr_decay="cosine",
        source="NVIDIA DeepLearningExamples ResNet50 v1.5, "
        "PyTorch/Classification/ConvNets/configs.yml",
    ),
}
DEFAULT_RECIPE = "goyal"
WEIGHT_DECAY = RECIPES[DEFAULT_RECIPE].weight_decay
LABEL_SMOOTHING = RECIPES[DEFAULT_RECIPE].label_smoothing


class FromRecipe:
    """The default of an option whose value comes from `--recipe` (shown so in `--help`)."""

    def __repr__(self) -> str:
        return "from --recipe"


FROM_RECIPE = FromRecipe()


def apply(args: argparse.Namespace) -> None:
    """Fills every option left at FROM_RECIPE with the value of `args.recipe`."""
    chosen = asdict(RECIPES[args.recipe])
    for name, value in chosen.items():
        if name != "source" and getattr(args, name, None) is FROM_RECIPE:
            setattr(args, name, value)


def describe() -> str:
    """Every recipe with its values and source, for `--help`."""
    parts = []
    for name, r in RECIPES.items():
        parts.append(
            f"{name}: lr {r.base_lr:g} per 256, momentum {r.momentum:g}, weight decay "
            f"{r.weight_decay:.12g}, label smoothing {r.label_smoothing:g}, warm-up "
            f"{r.warmup_epochs:g} epochs, {r.lr_decay} decay ({r.source})"
        )
    return "; ".join(parts)


def summary_line(args, tensors: list[tuple[tuple[int, ...], bool]], peak: float, batch: int) -> str:
    """The line rank 0 prints before training: the model's trainable parameters, which of them
    decay, the loss and the rates. `tensors`: (shape, decays) per trainable tensor; `batch`: the
    global batch of one optimizer step."""
    total = sum(math.prod(shape) for shape, _ in tensors)
    decayed = [shape for shape, decays in tensors if decays]
    start = min(args.base_lr, peak) if args.warmup_epochs else peak
    return (
        f"Recipe: {args.recipe}, {args.model}, {total:,} trainable parameters in "
        f"{len(tensors)} tensors; "
        f"weight decay {args.weight_decay:g} on {len(decayed)} kernels "
        f"({sum(math.prod(s) for s in decayed):,} parameters), none on the other "
        f"{len(tensors) - len(decayed)} tensors; label smoothing {args.label_smoothing:g}; "
        f"global batch {batch}, peak rate {peak:.6g} (--base-lr {args.base_lr:g} per "
        f"{args.base_batch}), first step {start:.6g}, warm-up {args.warmup_epochs:g} epochs, "
        f"{args.lr_decay} decay, momentum {args.momentum:g}"
    )
