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
`validation-00000-of-00128`.

The writer needs no TensorFlow (so `azdl data sample|prepare` run in the operator environment):
`serialize_example` encodes the Example in protobuf's wire format (tensorflow/core/example/
{example,feature}.proto; int64 lists packed, as proto3 packs them) and `RecordWriter` frames
records as TensorFlow's record_writer.cc does (the framing is described in
training.data.reader). tests/training checks both against TensorFlow's own parser and tf.data.
Only `parse_example`, the tf.data side, imports TensorFlow, inside the function.
"""

import struct

from training.data.reader import masked_crc
from training.data.shards import shard_name

__all__ = [
    "FEATURE_KEYS",
    "IMAGE_FORMAT",
    "RecordWriter",
    "parse_example",
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


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s: ten bytes of two's complement, as protobuf writes
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _bytes_feature(value: bytes) -> bytes:
    return _field(1, _field(1, value))  # Feature.bytes_list = 1 { BytesList.value = 1 }


def _int64_feature(value: int) -> bytes:
    return _field(3, _field(1, _varint(value)))  # Feature.int64_list = 3 { packed value = 1 }


def serialize_example(
    image: bytes, label: int, height: int, width: int, filename: str, image_format: str = "JPEG"
) -> bytes:
    """One serialized `tf.train.Example` in the schema above (writer side)."""
    if label < 0:
        raise ValueError(f"label must be 0-based (>= 0), got {label} for {filename!r}")
    features = {
        "image/encoded": _bytes_feature(image),
        "image/class/label": _int64_feature(label),
        "image/height": _int64_feature(height),
        "image/width": _int64_feature(width),
        "image/format": _bytes_feature(image_format.encode()),
        "image/filename": _bytes_feature(filename.encode()),
    }
    # Example.features = 1 { Features.feature = 1: map entries { key = 1, value = 2 } }
    entries = b"".join(
        _field(1, _field(1, key.encode()) + _field(2, value)) for key, value in features.items()
    )
    return _field(1, entries)


class RecordWriter:
    """Writes a TFRecord file: per record, the length and its masked CRC-32C, the data and its
    masked CRC-32C (tf.io.TFRecordWriter's framing, uncompressed)."""

    def __init__(self, path: str):
        self._file = open(path, "wb")  # noqa: SIM115 (closed by close() / the context manager)

    def write(self, data: bytes) -> None:
        length = struct.pack("<Q", len(data))
        self._file.write(length + struct.pack("<I", masked_crc(length)))
        self._file.write(data + struct.pack("<I", masked_crc(data)))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
