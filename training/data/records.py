"""THE ImageNet TFRecord schema, shared by the data tools (writer) and the input pipeline (reader).

One `tf.train.Example` per image:

| feature              | type   | value                                   |
| -------------------- | ------ | --------------------------------------- |
| `image/encoded`      | bytes  | the JPEG file's bytes                   |
| `image/class/label`  | int64  | 0-based class index                     |
| `image/height`       | int64  | pixels                                  |
| `image/width`        | int64  | pixels                                  |
| `image/format`       | bytes  | `JPEG`                                  |
| `image/filename`     | bytes  | source file name, for error messages    |

Shard files are named by `training.data.shards.shard_name`: `train-00000-of-01024`,
`validation-00000-of-00128`. TensorFlow is imported inside the functions so that the names and
constants here stay importable without it.
"""

from training.data.shards import shard_name

__all__ = ["FEATURE_KEYS", "IMAGE_FORMAT", "parse_example", "serialize_example", "shard_name"]

IMAGE_FORMAT = "JPEG"
FEATURE_KEYS = (
    "image/encoded",
    "image/class/label",
    "image/height",
    "image/width",
    "image/format",
    "image/filename",
)


def serialize_example(
    image: bytes, label: int, height: int, width: int, filename: str, image_format: str = "JPEG"
) -> bytes:
    """One serialized `tf.train.Example` in the schema above (writer side)."""
    import tensorflow as tf

    if label < 0:
        raise ValueError(f"label must be 0-based (>= 0), got {label} for {filename!r}")

    def _bytes(value: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def _int(value: int) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))

    features = {
        "image/encoded": _bytes(image),
        "image/class/label": _int(label),
        "image/height": _int(height),
        "image/width": _int(width),
        "image/format": _bytes(image_format.encode()),
        "image/filename": _bytes(filename.encode()),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def parse_example(serialized):
    """A scalar serialized Example (a `tf.string` tensor) → dict of tensors keyed as above."""
    import tensorflow as tf

    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/height": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/width": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/format": tf.io.FixedLenFeature([], tf.string, default_value=IMAGE_FORMAT),
        "image/filename": tf.io.FixedLenFeature([], tf.string, default_value=""),
    }
    return tf.io.parse_single_example(serialized, spec)
