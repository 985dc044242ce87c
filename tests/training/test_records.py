"""The TFRecord schema: what the writer serializes, the reader parses back unchanged; the
Example codec's messages are TensorFlow's, in both environments."""

import json
import subprocess

import pytest
import tensorflow as tf  # the training environment has both: a broken install must fail, not skip
from google.protobuf import descriptor_pb2

from azdl.envs import PACKAGES_ROOT
from training.data import example_codec, records, tfrecord
from training.tensorflow import pipeline

OPERATOR_PYTHON = PACKAGES_ROOT / ".venv" / "bin" / "python"


def test_serialize_then_parse_round_trips_every_feature():
    jpeg = tf.io.encode_jpeg(tf.zeros([6, 4, 3], tf.uint8)).numpy()
    blob = records.serialize_example(jpeg, 7, 6, 4, "n01440764_10026.JPEG")
    parsed = pipeline.parse_example(tf.constant(blob))
    assert set(parsed) == set(records.FEATURE_KEYS)
    assert parsed["image/encoded"].numpy() == jpeg
    assert int(parsed["image/class/label"]) == 7
    assert (int(parsed["image/height"]), int(parsed["image/width"])) == (6, 4)
    assert parsed["image/format"].numpy() == b"JPEG"
    assert parsed["image/filename"].numpy() == b"n01440764_10026.JPEG"


def test_negative_labels_are_refused_by_the_writer():
    with pytest.raises(ValueError, match="0-based"):
        records.serialize_example(b"x", -1, 1, 1, "a.jpg")


# --- the writer without TensorFlow, held against TensorFlow's own parser and tf.data ----------
# Truth written by others: protobuf's parser (tf.train.Example.FromString, the generated class of
# tensorflow/core/example/example.proto) and tf.data's TFRecord reader, which verifies both CRCs.


def _varint(value: int) -> bytes:
    out, value = bytearray(), value & (1 << 64) - 1
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entry(key: str, *feature_payloads: bytes) -> bytes:
    return _len_field(
        1, _len_field(1, key.encode()) + b"".join(_len_field(2, f) for f in feature_payloads)
    )


def _example(*entries: bytes) -> bytes:
    return _len_field(1, b"".join(entries))


def _as_lists(example: tf.train.Example) -> dict[str, list]:
    out = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = list(getattr(feature, kind).value) if kind else []
    return out


@pytest.mark.parametrize(
    "label,height,width,name",
    [
        (0, 0, 0, ""),
        (7, 375, 500, "n01440764_10026.JPEG"),
        (999, 2**31, 1, "ü.jpeg"),
        (2**62, 1, 1, "x"),
    ],
)
def test_the_writers_examples_are_what_tensorflow_builds(label, height, width, name):
    jpeg = bytes(range(256)) * 3
    ours = tf.train.Example.FromString(records.serialize_example(jpeg, label, height, width, name))
    feature = tf.train.Feature
    theirs = tf.train.Example(
        features=tf.train.Features(
            feature={
                "image/encoded": feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                "image/class/label": feature(int64_list=tf.train.Int64List(value=[label])),
                "image/height": feature(int64_list=tf.train.Int64List(value=[height])),
                "image/width": feature(int64_list=tf.train.Int64List(value=[width])),
                "image/format": feature(bytes_list=tf.train.BytesList(value=[b"JPEG"])),
                "image/filename": feature(bytes_list=tf.train.BytesList(value=[name.encode()])),
            }
        )
    )
    assert ours == theirs


def test_tf_data_reads_the_writers_files_and_checks_their_checksums(tmp_path):
    blobs = [records.serialize_example(b"j" * n, n, n, n, f"{n}.jpg") for n in (1, 200, 70000)]
    path = tmp_path / "train-00000-of-00001"
    with tfrecord.RecordWriter(str(path)) as writer:
        for blob in blobs:
            writer.write(blob)
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == blobs
    damaged = bytearray(path.read_bytes())
    damaged[20] ^= 0xFF  # a byte of the first record's data: only its checksum can tell
    path.write_bytes(bytes(damaged))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))


def _int64s(*values, packed=True) -> bytes:
    if packed:
        return _len_field(3, _len_field(1, b"".join(map(_varint, values))))
    return _len_field(3, b"".join(_varint(1 << 3) + _varint(v) for v in values))


def _bytes(*values) -> bytes:
    return _len_field(1, b"".join(_len_field(1, v) for v in values))


@pytest.mark.parametrize(
    "blob",
    [
        # one list split across two occurrences of the same kind inside one Feature
        _example(_entry("b", _bytes(b"a") + _bytes(b"b", b"c"))),
        # packed and unpacked int64 occurrences, concatenated
        _example(_entry("i", _int64s(1, -2) + _int64s(3, packed=False))),
        # a Feature whose value field occurs twice: the two messages merge
        _example(_entry("i", _int64s(4), _int64s(5))),
        # another kind after the first: the oneof keeps the last
        _example(_entry("k", _bytes(b"gone") + _int64s(9))),
        # a key repeated in the map: the last entry replaces the first
        _example(_entry("k", _int64s(1)), _entry("k", _bytes(b"last"))),
        # two `features` fields: their maps merge
        _example(_entry("a", _int64s(1))) + _example(_entry("b", _bytes(b"x"))),
    ],
    ids=[
        "split-list",
        "packed-and-unpacked",
        "value-twice",
        "kind-switch",
        "key-twice",
        "features-twice",
    ],
)
def test_split_and_repeated_fields_read_as_protobuf_reads_them(blob):
    from training.data.example_codec import decode_example

    assert decode_example(blob) == _as_lists(tf.train.Example.FromString(blob))


@pytest.mark.parametrize(
    "blob",
    [
        _example(_entry("k", _int64s(1)))[:-1] + b"\xff",
        b"\x0b\x08\x01",
        b"\x0c",
        b"\x0e",
        b"\x0a\x10abc",
        _example(_entry("f", _len_field(2, _len_field(1, b"\x00" * 5)))),
        b"\x0a\x02" + b"\x0a\x80",
    ],
    ids=[
        "truncated-varint",
        "unterminated-group",
        "lone-group-end",
        "reserved-wire-type",
        "past-the-end",
        "odd-floats",
        "cut-length",
    ],
)
def test_malformed_examples_raise_a_clear_error(blob):
    from google.protobuf.message import DecodeError

    from training.data.records import ExampleError, image_record

    with pytest.raises(DecodeError):  # TensorFlow's own class agrees that the bytes are malformed
        tf.train.Example.FromString(blob)
    message = rf"not a well-formed tf.train.Example: protobuf cannot parse its {len(blob)} bytes"
    with pytest.raises(ExampleError, match=message):
        image_record(blob)


def test_groups_of_unknown_fields_are_skipped_as_protobuf_skips_them():
    from training.data.example_codec import decode_example

    group = b"\x7b\x08\x05\x7c"  # field 15: start group, a varint field inside, end group
    blob = group + _example(_entry("k", _int64s(7))) + group
    assert decode_example(blob) == _as_lists(tf.train.Example.FromString(blob)) == {"k": [7]}


def test_a_record_with_the_wrong_value_types_names_the_feature():
    from training.data.records import ExampleError, image_record

    blob = _example(_entry("image/encoded", _int64s(1)), _entry("image/class/label", _int64s(3)))
    with pytest.raises(
        ExampleError, match="'image/encoded' holds int values, the schema says bytes"
    ):
        image_record(blob)


@pytest.mark.parametrize(
    "name", ["Example", "Features", "Feature", "BytesList", "FloatList", "Int64List"]
)
def test_the_codecs_messages_are_tensorflows(name):
    """Field for field (numbers, types, labels, oneof, packed, the map entry) the descriptor
    example_codec builds in code is the one TensorFlow generated from its .proto files."""
    ours, theirs = descriptor_pb2.DescriptorProto(), descriptor_pb2.DescriptorProto()
    example_codec.Example.DESCRIPTOR.file.pool.FindMessageTypeByName(
        f"tensorflow.{name}"
    ).CopyToProto(ours)
    getattr(tf.train, name).DESCRIPTOR.CopyToProto(theirs)
    assert ours == theirs


def test_the_operator_environment_writes_and_reads_what_tensorflow_does(tmp_path):
    """`azdl data prepare` runs the codec under the operator environment's protobuf 5: its
    records are TensorFlow's Examples, and it reads TensorFlow's Examples back unchanged."""
    feature = tf.train.Feature
    theirs = tf.train.Example(
        features=tf.train.Features(
            feature={
                "b": feature(bytes_list=tf.train.BytesList(value=[b"a", b"\xff" * 300])),
                "f": feature(float_list=tf.train.FloatList(value=[0.5, -2.0])),
                "i": feature(int64_list=tf.train.Int64List(value=[-1, 2**62])),
            }
        )
    )
    (tmp_path / "theirs.bin").write_bytes(theirs.SerializeToString())
    script = """
import json, sys
from google.protobuf import __version__
from training.data import example_codec, records
blob = open(sys.argv[1], "rb").read()
decoded = example_codec.decode_example(blob)
open(sys.argv[2], "wb").write(records.serialize_example(b"jpeg", 7, 375, 500, "x.JPEG"))
print(json.dumps({"protobuf": __version__,
                  "decoded": {k: [v.hex() if isinstance(v, bytes) else v for v in vs]
                              for k, vs in decoded.items()}}))
"""
    run = subprocess.run(
        [str(OPERATOR_PYTHON), "-c", script, tmp_path / "theirs.bin", tmp_path / "ours.bin"],
        cwd=PACKAGES_ROOT,
        env={"PYTHONPATH": str(PACKAGES_ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(run.stdout)
    assert int(result["protobuf"].split(".")[0]) >= 5  # the other runtime, not this one
    assert result["decoded"] == {"b": ["61", "ff" * 300], "f": [0.5, -2.0], "i": [-1, 2**62]}
    ours = tf.train.Example.FromString((tmp_path / "ours.bin").read_bytes())
    assert _as_lists(ours) == {
        "image/encoded": [b"jpeg"],
        "image/class/label": [7],
        "image/height": [375],
        "image/width": [500],
        "image/format": [b"JPEG"],
        "image/filename": [b"x.JPEG"],
    }
