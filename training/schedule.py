"""The learning-rate schedule every flavour uses (pure Python): the peak rate scaled linearly with
the global batch, gradual warm-up from the base rate, then step or cosine decay; every flavour
sets the rate before each optimizer step from `lr_at(steps done / steps per epoch)`. The rules
and their sources: docs/architecture.md ("Learning-rate schedule").
"""

import functools
import math
from collections.abc import Callable

DECAYS = ("step", "cosine", "none")


def steps_per_epoch(examples: int, batch_per_worker: int, workers: int, grad_accum: int) -> int:
    """Optimizer steps that cover `examples` once (at least one); a step takes `grad_accum`
    micro-batches of `batch_per_worker` on each of `workers`."""
    return max(1, examples // (batch_per_worker * grad_accum * workers))


def peak_lr(base_lr: float, base_batch: int, batch_per_worker: int, workers: int) -> float:
    return base_lr * batch_per_worker * workers / base_batch


def decay_multiplier(
    epoch: float,
    *,
    decay: str,
    epochs: int,
    warmup_epochs: float = 0.0,
    decay_epochs: tuple[int, ...] = (30, 60, 80),
    decay_factor: float = 0.1,
) -> float:
    """The factor on the peak rate after warm-up, at (fractional) `epoch`."""
    if decay == "step":
        return decay_factor ** sum(1 for boundary in decay_epochs if epoch >= boundary)
    if decay == "cosine":
        span = max(epochs - warmup_epochs, 1e-9)
        progress = min(max((epoch - warmup_epochs) / span, 0.0), 1.0)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if decay == "none":
        return 1.0
    raise ValueError(f"unknown decay {decay!r}; allowed: {', '.join(DECAYS)}")


def lr_at(
    epoch: float,
    *,
    peak: float,
    base: float,
    warmup_epochs: float,
    decay: str,
    epochs: int,
    decay_epochs: tuple[int, ...] = (30, 60, 80),
    decay_factor: float = 0.1,
) -> float:
    """The learning rate at (fractional) `epoch` = completed steps / steps per epoch; `base` is
    `--base-lr`, where the warm-up starts."""
    if warmup_epochs > 0 and epoch < warmup_epochs:
        start = min(base, peak)
        return start + (peak - start) * epoch / warmup_epochs
    return peak * decay_multiplier(
        epoch,
        decay=decay,
        epochs=epochs,
        warmup_epochs=warmup_epochs,
        decay_epochs=decay_epochs,
        decay_factor=decay_factor,
    )


def from_options(args, peak: float) -> Callable[[float], float]:
    """`lr_at` as a function of the epoch, with a command line's schedule options."""
    return functools.partial(
        lr_at,
        peak=peak,
        base=args.base_lr,
        warmup_epochs=args.warmup_epochs,
        decay=args.lr_decay,
        epochs=args.epochs,
        decay_epochs=tuple(args.decay_epochs),
        decay_factor=args.decay_factor,
    )
