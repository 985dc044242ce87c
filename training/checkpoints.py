"""Checkpoint rules every flavour follows (stdlib only; each flavour writes its own payload): rank
0 writes, the payload first and then `progress.json` atomically, at epoch ends and every
`--checkpoint-every-steps` steps; on resume rank 0 reads and broadcasts; the last `keep` are
kept (docs/architecture.md, "Checkpoints").
"""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from training.errors import TrainingError

PROGRESS_FILE = "progress.json"


@dataclass(frozen=True)
class Progress:
    """Where a run stands after a checkpoint: `epoch` epochs done = the next epoch to run, and
    `step` optimizer steps of it done (0 at an epoch's end)."""

    epoch: int
    global_step: int
    checkpoint: str  # payload name inside the checkpoint dir, e.g. "ckpt-00003"
    framework: str
    model: str
    step: int = 0  # absent from progress files written before mid-epoch checkpoints
    steps_per_epoch: int = 0  # what `step` counts in (0: unknown, older progress files)


def payload_name(epoch: int, step: int = 0) -> str:
    """`ckpt-00003` after 3 epochs; `ckpt-00003-s000120` 120 steps into the 4th."""
    return f"ckpt-{epoch:05d}" + (f"-s{step:06d}" if step else "")


AUTO = "auto"  # --checkpoint-every-steps auto (training.checkpoint_plan)


def due(global_step: int, every: int | str | None) -> bool:
    """Whether `--checkpoint-every-steps every` asks for a checkpoint after `global_step`."""
    if every == AUTO:
        from training import checkpoint_plan

        return checkpoint_plan.plan().due(global_step)
    return bool(every) and global_step % every == 0


def rescale_step(step: int, was: int, now: int) -> int:
    """`step` of an epoch of `was` steps, as a step of an epoch of `now`: the same fraction of
    the epoch when the number of workers (so the steps per epoch) changed in between."""
    if not was or was == now:
        return step
    return min(now, round(step * now / was))


def describe(progress: Progress) -> str:
    """`epoch 3 (step 1620)`, or `epoch 3, step 120 of epoch 4 (step 1620)` mid-epoch: the words
    every flavour's resume line uses."""
    inside = f", step {progress.step} of epoch {progress.epoch + 1}" if progress.step else ""
    return f"epoch {progress.epoch}{inside} (step {progress.global_step})"


def read_progress(ckpt_dir: str | Path | None) -> Progress | None:
    """The last complete checkpoint's progress, or None when there is none (a fresh start)."""
    if not ckpt_dir:
        return None
    path = Path(ckpt_dir) / PROGRESS_FILE
    if not path.exists():
        return None
    try:
        return Progress(**json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError) as exc:
        raise TrainingError(f"unreadable checkpoint progress file {str(path)!r}: {exc}") from exc


def check_compatible(progress: Progress, framework: str, model: str, ckpt_dir) -> None:
    """Refuse to resume a checkpoint written by another framework or for another model."""
    if (progress.framework, progress.model) != (framework, model):
        raise TrainingError(
            f"checkpoint in {str(ckpt_dir)!r} is for {progress.framework}/{progress.model}, "
            f"not {framework}/{model}: use another --checkpoint-dir or the same settings"
        )


def write_progress(ckpt_dir: str | Path, progress: Progress, keep: int = 2) -> Path:
    """Point `progress.json` at a payload that is already written, then prune old payloads."""
    ckpt_dir = Path(ckpt_dir)
    path = ckpt_dir / PROGRESS_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(progress), indent=2) + "\n")
    os.replace(tmp, path)
    names = sorted({p.name.split(".")[0] for p in ckpt_dir.glob("ckpt-*")})
    for old in names[:-keep] if keep > 0 else []:
        if old != progress.checkpoint:
            for file in ckpt_dir.glob(f"{old}.*"):
                file.unlink()
    return ckpt_dir / progress.checkpoint
