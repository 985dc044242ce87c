"""The learning-rate schedule every flavour uses (pure Python).

- Linear scaling (Goyal et al., 2017): `--base-lr` is the rate for `--base-batch` images per
  step, so the peak rate is `base_lr × global_batch / base_batch`. With a fixed per-worker batch
  this is linear in the number of workers — and 2 workers × b gets the same rate as
  1 worker × 2b, which keeps the averaging identity exact.
- Gradual warm-up over `warmup_epochs` (fractions allowed), as Goyal et al. (section 2.2) give
  it: linear from the base rate (`base_lr`, the rate of `base_batch`) up to `peak`, evaluated at
  the steps completed. It depends on the global batch only, not on how it is made up (workers ×
  batch × `--grad-accum`): 1 GPU × 256 × 4 micro-batches warms up exactly like 4 GPUs × 256.
  A global batch at or below `base_batch` has `peak <= base_lr` and needs no warm-up: its
  rate starts at `peak` (starting above the linear-scaled rate would defeat the purpose).
- Then step decay (× `decay_factor` at each of `decay_epochs`) or cosine decay to 0 at `epochs`.

An epoch is one pass over the data: `steps_per_epoch` optimizer steps. Every flavour sets the
rate before each optimizer step from `lr_at(steps done / steps per epoch)`.
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
