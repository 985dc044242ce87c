"""ResNet50 v1.5 in Keras, built like training/torch/torch_resnet.py, parameter for parameter
(v1.5 strides, no conv biases, He fan-out init, torch's batch-norm settings and padding, zero-γ
last batch norms); layer names are the torch parameter paths with `_` for `.`. The sources of
each choice: docs/architecture.md ("The Keras ResNet50").
"""

import tensorflow as tf

BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5
BLOCKS = (3, 4, 6, 3)
EXPANSION = 4


def _conv(x, filters, kernel, stride, name):
    he_fan_out = tf.keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")
    pad = (kernel - 1) // 2
    if pad:
        x = tf.keras.layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
    return tf.keras.layers.Conv2D(
        filters, kernel, strides=stride, use_bias=False, kernel_initializer=he_fan_out, name=name
    )(x)


def _bn(x, name, zero_gamma=False):
    return tf.keras.layers.BatchNormalization(
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        gamma_initializer="zeros" if zero_gamma else "ones",
        name=name,
    )(x)


def _bottleneck(x, width, stride, name):
    """1×1 reduce → 3×3 (carries the stride) → 1×1 expand (γ = 0), plus the shortcut."""
    out_channels = width * EXPANSION
    shortcut = x
    if stride != 1 or x.shape[-1] != out_channels:
        shortcut = _conv(x, out_channels, 1, stride, f"{name}_downsample_0")
        shortcut = _bn(shortcut, f"{name}_downsample_1")
    out = tf.keras.layers.ReLU()(_bn(_conv(x, width, 1, 1, f"{name}_conv1"), f"{name}_bn1"))
    out = tf.keras.layers.ReLU()(_bn(_conv(out, width, 3, stride, f"{name}_conv2"), f"{name}_bn2"))
    out = _bn(_conv(out, out_channels, 1, 1, f"{name}_conv3"), f"{name}_bn3", zero_gamma=True)
    return tf.keras.layers.ReLU()(tf.keras.layers.Add()([out, shortcut]))


def resnet50(inputs, num_classes: int):
    """The logits of ResNet50 v1.5 on `inputs` (NHWC); 25,557,032 parameters at 1,000 classes."""
    x = _conv(inputs, 64, 7, 2, "stem_0")
    x = tf.keras.layers.ReLU()(_bn(x, "stem_1"))
    # Zero padding equals torch's -inf padding here: the input is a ReLU output.
    x = tf.keras.layers.ZeroPadding2D(1, name="stem_3_pad")(x)
    x = tf.keras.layers.MaxPooling2D(3, strides=2, name="stem_3")(x)
    index = 0
    for stage, count in enumerate(BLOCKS):
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _bottleneck(x, 64 * 2**stage, stride, f"stages_{index}")
            index += 1
    x = tf.keras.layers.GlobalAveragePooling2D(name="pool")(x)
    bound = 1.0 / x.shape[-1] ** 0.5  # torch nn.Linear's default initialisation
    return tf.keras.layers.Dense(
        num_classes,
        kernel_initializer=tf.keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform"),
        bias_initializer=tf.keras.initializers.RandomUniform(-bound, bound),
        name="fc",
    )(x)
