"""THE ImageNet TFRecord schema, shared by the data tools (writer) and the input pipeline (reader).

One `tf.train.Example` per image: `image/encoded` (bytes: the JPEG file's bytes),
`image/class/label` (int64: 0-based class index), `image/height` and `image/width` (int64:
pixels), `image/format` (bytes: `JPEG`), `image/filename` (bytes: the source file name, for
error messages). `serialize_example` writes one, `image_record` reads one; no TensorFlow here.
"""

from dataclasses import dataclass

from training.data.example_codec import (
    ExampleError,
    bytes_feature,
    decode_example,
    encode_example,
    int64_feature,
)
from training.data.shards import shard_name

__all__ = [
    "FEATURE_KEYS",
    "IMAGE_FORMAT",
    "ImageRecord",
    "image_record",
    "serialize_example",
    "shard_name",
]

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
    if label < 0:
        raise ValueError(f"label must be 0-based (>= 0), got {label} for {filename!r}")
    features = {
        "image/encoded": bytes_feature(image),
        "image/class/label": int64_feature(label),
        "image/height": int64_feature(height),
        "image/width": int64_feature(width),
        "image/format": bytes_feature(image_format.encode()),
        "image/filename": bytes_feature(filename.encode()),
    }
    return encode_example(features)


@dataclass(frozen=True)
class ImageRecord:
    jpeg: bytes
    label: int
    height: int  # 0 when the writer left it out
    width: int
    filename: str


def image_record(blob: bytes) -> ImageRecord:
    """The image fields of training.data.records' schema from one serialized Example."""
    features = decode_example(blob)
    if "image/encoded" not in features or "image/class/label" not in features:
        raise ExampleError("not an image record: image/encoded or image/class/label is missing")

    def first(key: str, kind: type, default):
        values = features.get(key) or [default]
        if not isinstance(values[0], kind):
            got = type(values[0]).__name__
            raise ExampleError(
                f"feature {key!r} holds {got} values, the schema says {kind.__name__}"
            )
        return values[0]

    return ImageRecord(
        jpeg=first("image/encoded", bytes, b""),
        label=first("image/class/label", int, -1),
        height=first("image/height", int, 0),
        width=first("image/width", int, 0),
        filename=first("image/filename", bytes, b"").decode(errors="replace"),
    )
