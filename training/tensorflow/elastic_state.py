"""Where a TensorFlow run stands (`Position`), and Horovod elastic training for the Keras and TF
flavours (`--elastic`): `ModelState` holds the model's and optimizer's variables, the fp16 loss
scale and the position, and `run` rolls the survivors back to the last commit after a worker is
lost. How, and why not Horovod's own state: docs/architecture.md ("Elastic training").
"""

from dataclasses import dataclass

from training import checkpoints, events


@dataclass
class Position:
    """Epochs done, steps done in the current epoch, steps in all, and the current epoch's
    running sums on this worker (training loss, correct predictions, images)."""

    epoch: int = 0
    step: int = 0
    global_step: int = 0
    loss_sum: float = 0.0
    correct: int = 0
    images: int = 0
    epoch_steps: int = 0  # the steps per epoch `step` counts in (0: not known yet)

    @classmethod
    def at(cls, progress) -> "Position":
        """Where a checkpoint's `training.checkpoints.Progress` (or None: the start) leaves off."""
        if progress is None:
            return cls()
        return cls(
            progress.epoch, progress.step, progress.global_step,
            epoch_steps=progress.steps_per_epoch,
        )  # fmt: skip

    def align(self, steps: int) -> None:
        """Count `step` in epochs of `steps` steps: after a change in the number of workers the
        run goes on at the same fraction of the epoch."""
        self.step = checkpoints.rescale_step(self.step, self.epoch_steps, steps)
        self.epoch_steps = steps

    def next_epoch(self) -> None:
        self.epoch, self.step = self.epoch + 1, 0
        self.loss_sum, self.correct, self.images = 0.0, 0, 0

    def commit(self) -> None:
        """Nothing to do outside elastic training (see `ModelState.commit`)."""


def state_variables(model, optimizer) -> list:
    """What must agree on every worker: the model's variables, the optimizer's, and a dynamic
    loss scale's (its scale and good-step counter, which `optimizer.variables` leaves out)."""
    variables = list(model.variables) + list(optimizer.variables)
    loss_scale = getattr(optimizer, "_loss_scale", None)  # keras LossScaleOptimizer, dynamic
    if loss_scale is not None and hasattr(loss_scale, "counter"):
        variables += [loss_scale.counter, loss_scale.current_loss_scale]
    return variables


def model_state(model, optimizer, position: Position):
    """A Horovod elastic state over the model, optimizer and `position`'s fields."""
    import horovod.tensorflow as hvd
    import tensorflow as tf
    from horovod.common.elastic import ObjectState

    class ModelState(ObjectState):
        def __init__(self):
            self._variables = state_variables(model, optimizer)
            self._save_variables()
            super().__init__(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, **vars(position))

        def next_epoch(self) -> None:
            Position.next_epoch(self)

        def align(self, steps: int) -> None:
            Position.align(self, steps)

        def save(self):
            self._save_variables()
            super().save()

        def restore(self):
            for variable, value in zip(self._variables, self._saved, strict=True):
                variable.assign(value)
            super().restore()

        def sync(self):
            hvd.broadcast_variables(self._variables, root_rank=0)
            self._save_variables()
            super().sync()

        def _save_variables(self):
            self._saved = [tf.identity(v) for v in self._variables]

    return ModelState()


def run(train_from, state) -> None:
    """`train_from(state)` under Horovod's elastic driver. Rank 0 reports every change of
    workers and, at the end, how many the run ended with."""
    import horovod.tensorflow as hvd

    started_with, resets = hvd.size(), 0

    def on_reset():
        nonlocal resets
        resets += 1
        events.rank_is(hvd.rank())
        if hvd.rank() == 0:
            print(f"workers changed: now {hvd.size()} (reset {resets})", flush=True)

    state.register_reset_callbacks([on_reset])
    hvd.elastic.run(train_from)(state)
    if hvd.rank() == 0:
        print(
            f"Elastic run finished with {hvd.size()} worker(s) "
            f"(started with {started_with}, {resets} reset(s))",
            flush=True,
        )
