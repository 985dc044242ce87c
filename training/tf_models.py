"""The Keras models the TensorFlow flavours train (built the same way on every rank)."""

import tensorflow as tf


def build_model(name: str, image_size: int, num_classes: int) -> tf.keras.Model:
    """`resnet50` (Keras Applications, random init) or `tiny`, a 2-conv net without batch norm.

    Both end in float32 logits, also under a mixed-precision policy. `tiny` exists for tests: it
    trains in seconds on CPU and, having no batch-norm statistics, makes the averaging identity
    (2 workers × b == 1 worker × 2b) exact up to float rounding.
    """
    inputs = tf.keras.Input((image_size, image_size, 3), name="images")
    if name == "resnet50":
        body = tf.keras.applications.ResNet50(
            weights=None,
            input_tensor=inputs,
            classes=num_classes,
            classifier_activation=None,
        )
        x = body.output
    elif name == "tiny":
        x = tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu")(inputs)
        x = tf.keras.layers.Conv2D(32, 3, strides=2, activation="relu")(x)
        x = tf.keras.layers.GlobalAveragePooling2D()(x)
        x = tf.keras.layers.Dense(num_classes)(x)
    else:
        raise ValueError(f"unknown model {name!r}")
    logits = tf.keras.layers.Activation("linear", dtype="float32", name="logits")(x)
    return tf.keras.Model(inputs, logits, name=name)
