"""The `tf.train.Example` codec: a serialized Example read with protobuf, using TensorFlow's
message definitions built in code at import, into {feature key: list of bytes | floats | ints};
and written by hand in protobuf's wire format. Why built in code, why the encoder is hand-written
(benchmarks/results/example_codec.md), and the sources: docs/architecture.md ("Records, framing
and the Example codec").
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

_F = descriptor_pb2.FieldDescriptorProto
_LISTS = (("bytes_list", "BytesList", _F.TYPE_BYTES), ("float_list", "FloatList", _F.TYPE_FLOAT))
_LISTS += (("int64_list", "Int64List", _F.TYPE_INT64),)


def _file() -> descriptor_pb2.FileDescriptorProto:
    """Example, Features, Feature and the three lists, as the two .proto files declare them."""
    file = descriptor_pb2.FileDescriptorProto(
        name="azdl/tensorflow_example.proto", package="tensorflow", syntax="proto3"
    )
    optional, repeated, message = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED, _F.TYPE_MESSAGE
    feature = file.message_type.add(name="Feature")  # oneof kind { BytesList bytes_list = 1; … }
    feature.oneof_decl.add(name="kind")
    for number, (field, list_type, value_type) in enumerate(_LISTS, 1):
        values = file.message_type.add(name=list_type).field.add(
            name="value", number=1, label=repeated, type=value_type
        )
        if value_type != _F.TYPE_BYTES:
            values.options.packed = True  # `[packed = true]` in feature.proto
        feature.field.add(
            name=field,
            number=number,
            label=optional,
            type=message,
            type_name=f".tensorflow.{list_type}",
            oneof_index=0,
        )
    features = file.message_type.add(name="Features")  # map<string, Feature> feature = 1
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=optional, type=_F.TYPE_STRING)
    entry.field.add(
        name="value", number=2, label=optional, type=message, type_name=".tensorflow.Feature"
    )
    features.field.add(
        name="feature",
        number=1,
        label=repeated,
        type=message,
        type_name=".tensorflow.Features.FeatureEntry",
    )
    file.message_type.add(name="Example").field.add(  # Features features = 1
        name="features", number=1, label=optional, type=message, type_name=".tensorflow.Features"
    )
    return file


# A pool of its own: TensorFlow's generated classes (the same full names) may be loaded too.
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
Example = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.Example"))


class ExampleError(ValueError):
    """A record that is not a tf.train.Example, or not in the schema's shape."""


def decode_example(blob: bytes) -> dict[str, list]:
    """A serialized tf.train.Example → {feature key: list of bytes | floats | ints}, as protobuf
    reads it (repeated fields merge, a key that occurs again replaces its earlier value, the
    last list kind of a Feature wins). Malformed bytes raise ExampleError."""
    try:
        example = Example.FromString(blob)
    except DecodeError as exc:
        raise ExampleError(
            f"not a well-formed tf.train.Example: protobuf cannot parse its {len(blob)} bytes "
            f"({exc})"
        ) from None
    features = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        features[key] = list(getattr(feature, kind).value) if kind else []
    return features


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s: ten bytes of two's complement, as protobuf writes
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def bytes_feature(value: bytes) -> bytes:
    return _field(1, _field(1, value))  # Feature.bytes_list = 1 { BytesList.value = 1 }


def int64_feature(value: int) -> bytes:
    # Feature.int64_list = 3 { packed value = 1 }
    return _field(3, _field(1, _encode_varint(value)))


def encode_example(features: dict[str, bytes]) -> bytes:
    """One serialized Example from {key: a Feature from bytes_feature / int64_feature}."""
    # Example.features = 1 { Features.feature = 1: map entries { key = 1, value = 2 } }
    entries = b"".join(
        _field(1, _field(1, key.encode()) + _field(2, value)) for key, value in features.items()
    )
    return _field(1, entries)
