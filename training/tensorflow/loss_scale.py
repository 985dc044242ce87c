"""fp16 loss scaling for Keras `model.fit` that Horovod's gradient accumulation can wrap.

Keras' `LossScaleOptimizer` wrapped *around* `hvd.DistributedOptimizer(...,
backward_passes_per_step=k)` updates the loss scale after every micro-batch: one accumulated
step then sums gradients taken at different scales, and a worker whose own micro-batch
overflowed halves its scale and skips while the others don't. The order here is the other way
round, `hvd.DistributedOptimizer(loss-scale optimizer(SGD))`:

    loss × scale → local gradients, still scaled → Horovod accumulates k micro-batches and
    allreduces them (fp16-compressed with --fp16-allreduce) → ÷ scale → the loss-scale
    optimizer checks the averaged gradients, skips or applies, and updates the scale: once
    per optimizer step, the same on every worker.

The gradients Horovod compresses are the scaled ones, as in the PyTorch flavour (GradScaler's
scaled gradients are allreduced, then unscaled) and the TF loop (scaled loss through
`DistributedGradientTape`): unscaled, a gradient below fp16's smallest subnormal (6e-8) would
arrive as zero. An overflowing micro-batch, or a sum that overflows fp16, makes the averaged
gradients inf, so the whole step is skipped and the scale halved.

Three adaptations let Horovod 0.28.1's `create_distributed_optimizer` (horovod/_keras/__init__.py)
wrap Keras 2.15's `LossScaleOptimizerV3`: Horovod rebuilds the optimizer with keyword arguments
from its config (the Keras metaclass passes the inner optimizer positionally), calls
`variables()` (a property here), and puts `apply_gradients`' result in a `tf.cond` whose other
branch returns the iteration count.
"""

import functools


class _CallableList(list):
    """A list that is also callable: `optimizer.variables` and `optimizer.variables()`."""

    def __call__(self):
        return self


@functools.cache
def _optimizer_class():
    import tensorflow as tf

    # Keras 2.15's LossScaleOptimizerV3, without importing keras' private modules.
    base = type(tf.keras.mixed_precision.LossScaleOptimizer(tf.keras.optimizers.SGD()))

    class AccumulatingLossScaleOptimizer(base):
        @property
        def variables(self):
            return _CallableList(self._optimizer.variables)

        def compute_gradients(self, loss, var_list, tape=None):
            """The gradients of the scaled loss, left scaled (Keras unscales them here)."""
            tape = tf.GradientTape() if tape is None else tape
            with tape:
                loss = self.get_scaled_loss(loss)
            return self._optimizer.compute_gradients(loss, var_list, tape=tape)

        def apply_gradients(self, grads_and_vars, **kwargs):
            """Unscales the (allreduced) gradients, then checks, applies or skips."""
            grads_and_vars = list(grads_and_vars)
            unscaled = self.get_unscaled_gradients([g for g, _ in grads_and_vars])
            variables = [v for _, v in grads_and_vars]
            super().apply_gradients(list(zip(unscaled, variables, strict=True)), **kwargs)
            return tf.identity(self.iterations)

        def aggregate_gradients(self, grads_and_vars):
            return self._optimizer.aggregate_gradients(grads_and_vars)

        @classmethod
        def from_config(cls, config, custom_objects=None):
            config = dict(config)
            inner = config.pop("inner_optimizer")
            if not isinstance(inner, tf.keras.optimizers.Optimizer):
                inner = tf.keras.optimizers.deserialize(
                    inner, custom_objects, use_legacy_optimizer=False
                )
            optimizer = cls.__new__(cls)  # past the metaclass, which passes it positionally
            optimizer.__init__(inner_optimizer=inner, **config)
            return optimizer

    return AccumulatingLossScaleOptimizer


def loss_scale_optimizer(optimizer):
    """`optimizer` with dynamic loss scaling, to be wrapped by `hvd.DistributedOptimizer`."""
    return _optimizer_class().from_config({"inner_optimizer": optimizer})
