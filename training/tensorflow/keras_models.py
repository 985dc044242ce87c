"""The Keras models the TensorFlow flavours train (built the same way on every rank)."""

import tensorflow as tf

from training.tensorflow import keras_resnet


class Model(tf.keras.Model):
    """A functional Keras model whose logged `loss` is the data loss alone.

    Keras adds `model.losses` (here the weight-decay penalty, training.recipe) to the compiled
    loss and logs the sum; this model still minimises the sum but logs the data loss, as the TF
    loop and the PyTorch flavour do, so the three flavours' loss lines compare.
    """

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        data_loss = self.compiled_loss(y, y_pred, sample_weight)  # tracked as `loss`
        if not self.losses:
            return data_loss
        return data_loss + tf.add_n([tf.cast(loss, data_loss.dtype) for loss in self.losses])


def build_model(name: str, image_size: int, num_classes: int) -> tf.keras.Model:
    """`resnet50` (v1.5, training.tensorflow.keras_resnet) or `tiny`, a 2-conv net without batch
    norm.

    Both end in float32 logits, also under a mixed-precision policy. `tiny` exists for tests: it
    trains in seconds on CPU and, having no batch-norm statistics, makes the averaging identity
    (2 workers × b == 1 worker × 2b) exact up to float rounding.
    """
    inputs = tf.keras.Input((image_size, image_size, 3), name="images")
    if name == "resnet50":
        x = keras_resnet.resnet50(inputs, num_classes)
    elif name == "tiny":
        x = tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu")(inputs)
        x = tf.keras.layers.Conv2D(32, 3, strides=2, activation="relu")(x)
        x = tf.keras.layers.GlobalAveragePooling2D()(x)
        x = tf.keras.layers.Dense(num_classes)(x)
    else:
        raise ValueError(f"unknown model {name!r}")
    logits = tf.keras.layers.Activation("linear", dtype="float32", name="logits")(x)
    return Model(inputs, logits, name=name)
