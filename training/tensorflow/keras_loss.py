"""The recipe's TensorFlow/Keras side: which kernels decay, the decay as a loss term, and the
label-smoothed loss. Why these choices, and their sources: docs/architecture.md ("Recipe") and
docs/recipe.md."""

import tensorflow as tf


def decayed_kernels(model) -> list:
    """The `kernel` of every convolution and dense layer of `model` (nested layers included);
    batch norm's gamma/beta and every bias are left out."""
    kernel_layers = (tf.keras.layers.Conv1D, tf.keras.layers.Conv2D, tf.keras.layers.Conv3D)
    kernel_layers += (tf.keras.layers.Dense,)
    layers = [model, *model.submodules]
    return [layer.kernel for layer in layers if isinstance(layer, kernel_layers)]


def add_weight_decay(model, weight_decay: float) -> list:
    """Adds `weight_decay / 2 · Σ w²` over the decayed kernels to `model.losses` (its gradient is
    `weight_decay · w`, PyTorch's coupled decay); returns those kernels."""
    kernels = decayed_kernels(model)
    if weight_decay > 0 and kernels:

        def penalty():
            squares = [tf.reduce_sum(tf.square(tf.cast(k, tf.float32))) for k in kernels]
            return 0.5 * weight_decay * tf.add_n(squares)

        model.add_loss(penalty)
    return kernels


def loss(label_smoothing: float):
    """Per-example label-smoothed cross-entropy of integer labels and float logits: a loss
    function for Keras' `compile` (Keras 2's SparseCategoricalCrossentropy has no smoothing).
    Computed on fp32 logits: under mixed precision an fp16 loss times the loss scale (2^15 at
    first) overflows as soon as the loss exceeds 2 (https://www.tensorflow.org/guide/mixed_precision)."""

    def smoothed_cross_entropy(labels, logits):
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
        nll = -tf.gather(log_probs, labels, axis=-1, batch_dims=1)
        if not label_smoothing:
            return nll
        uniform = -tf.reduce_mean(log_probs, axis=-1)
        return (1.0 - label_smoothing) * nll + label_smoothing * uniform

    return smoothed_cross_entropy
