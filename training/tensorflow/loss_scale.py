"""fp16 loss scaling for Keras `model.fit` that Horovod's gradient accumulation can wrap:
`hvd.DistributedOptimizer(loss-scale optimizer(SGD))`, so the loss scale is checked and updated
once per optimizer step, the same on every worker (why, and the adaptations Horovod 0.28.1
needs: docs/architecture.md, "fp16 loss scaling with Keras").
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
