"""Read the TFRecord shards `azdl data prepare` writes, without TensorFlow.

A TFRecord file is a sequence of records, each framed as (TensorFlow's record format,
tensorflow/tensorflow: tensorflow/python/lib/io/python_io.py and core/lib/io/record_writer.cc):

    uint64 length            little-endian
    uint32 masked_crc32c(length bytes)
    byte   data[length]      here: one serialized tf.train.Example (training.data.records' schema)
    uint32 masked_crc32c(data)

    masked_crc = ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32, crc = CRC-32C (Castagnoli)

Both checksums are verified, with Google's hardware-accelerated `google-crc32c`; a bad one is a
`TrainingError` that names the file, the record and its byte offset. The Example is decoded
straight from protobuf's wire format (tensorflow/core/example/{example,feature}.proto: Example
{Features features = 1}, Features {map<string, Feature> feature = 1}, Feature oneof {BytesList
bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3}, each list a `repeated`
field 1, numbers packed), so neither TensorFlow nor protobuf is needed.

The PyPI package `tfrecord` (1.14.6) was the candidate library; it reads the framing but skips
both checksums, hands out a buffer it overwrites on the next record, and needs protobuf.
"""

import os
import struct
from dataclasses import dataclass

import google_crc32c

from training.errors import TrainingError

_HEADER = struct.Struct("<QI")  # length, masked CRC of the length
_FOOTER = struct.Struct("<I")  # masked CRC of the data
_MASK_DELTA = 0xA282EAD8


def masked_crc(data) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


@dataclass(frozen=True)
class RecordRef:
    """Where one record's data lies: file index (into the reader's list), offset, length."""

    file: int
    offset: int
    length: int


def _corrupt(path: str, record: int, offset: int, what: str) -> TrainingError:
    where = f"record {record} at byte {offset}"
    return TrainingError(f"corrupt TFRecord file {path!r}: {where}: {what}")


def index_file(path: str, file_index: int = 0) -> list[RecordRef]:
    """Every record's place in `path`, from the headers alone (length checksums verified);
    the data checksums are verified when a record is read."""
    refs = []
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            header = f.read(_HEADER.size)
            if len(header) != _HEADER.size:
                raise _corrupt(path, len(refs), offset, "truncated record header")
            length, length_crc = _HEADER.unpack(header)
            if masked_crc(header[:8]) != length_crc:
                raise _corrupt(path, len(refs), offset, "length checksum mismatch")
            data_at = offset + _HEADER.size
            if data_at + length + _FOOTER.size > size:
                what = f"record of {length} bytes runs past the end"
                raise _corrupt(path, len(refs), offset, what)
            refs.append(RecordRef(file_index, data_at, length))
            offset = data_at + length + _FOOTER.size
            f.seek(offset)
    return refs


def read_record(path: str, fd: int, ref: RecordRef, record_number: int = -1) -> bytes:
    """One record's data, read with `os.pread` from the open file `fd` and checksum-verified."""
    blob = os.pread(fd, ref.length + _FOOTER.size, ref.offset)
    data, footer = blob[: ref.length], blob[ref.length :]
    if len(footer) != _FOOTER.size or _FOOTER.unpack(footer)[0] != masked_crc(data):
        where = ref.offset - _HEADER.size
        raise _corrupt(path, record_number, where, "data checksum mismatch")
    return data


def read_file(path: str):
    """Every record of `path` in order (a plain sequential reader, for tools and tests)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        for number, ref in enumerate(index_file(path)):
            yield read_record(path, fd, ref, number)
    finally:
        os.close(fd)


# --- tf.train.Example from protobuf's wire format -------------------------------------------

_VARINT, _FIXED64, _LEN, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5


class ExampleError(ValueError):
    """A record that is not a well-formed tf.train.Example; the message names the byte (counted
    from the start of the record's data) where decoding failed."""


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    start, result, shift = pos, 0, 0
    while True:
        if pos >= end:
            raise ExampleError(f"truncated varint at byte {start}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ExampleError(f"varint longer than 64 bits at byte {start}")


def _value(buf: bytes, pos: int, end: int, number: int, wire: int, at: int):
    """(value, position after it) of one field; groups (deprecated, wire types 3 and 4) are
    skipped whole, as protobuf skips fields it does not know (value None)."""
    if wire == _VARINT:
        return _varint(buf, pos, end)
    if wire == _LEN:
        length, pos = _varint(buf, pos, end)
        return (pos, pos + length), pos + length
    if wire == _FIXED32:
        return buf[pos : pos + 4], pos + 4
    if wire == _FIXED64:
        return buf[pos : pos + 8], pos + 8
    if wire == _START_GROUP:
        while True:
            if pos >= end:
                raise ExampleError(f"group {number} at byte {at} has no end")
            inner_at = pos
            key, pos = _varint(buf, pos, end)
            if key & 7 == _END_GROUP:
                if key >> 3 != number:
                    raise ExampleError(f"group {number} at byte {at} ends as {key >> 3}")
                return None, pos
            _, pos = _value(buf, pos, end, key >> 3, key & 7, inner_at)
    if wire == _END_GROUP:
        raise ExampleError(f"end of group {number} at byte {at} without its start")
    raise ExampleError(f"unsupported protobuf wire type {wire} at byte {at}")


def _fields(buf: bytes, pos: int, end: int):
    """(field number, wire type, value) of a message in buf[pos:end]; LEN values as (start, end)."""
    while pos < end:
        at = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        value, pos = _value(buf, pos, end, number, wire, at)
        if pos > end:
            raise ExampleError(f"field {number} at byte {at} runs past the end of its message")
        if wire != _START_GROUP:
            yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _list_values(buf: bytes, kind: int, start: int, end: int) -> list:
    """The values of one BytesList (1), FloatList (2) or Int64List (3) occurrence."""
    values: list = []
    for number, wire, value in _fields(buf, start, end):
        if number != 1:
            continue  # an unknown field: skipped, as protobuf does
        if kind == 1 and wire == _LEN:
            values.append(bytes(buf[value[0] : value[1]]))
        elif kind == 2 and wire in (_LEN, _FIXED32):  # packed, or one fixed32
            raw = buf[value[0] : value[1]] if wire == _LEN else value
            if len(raw) % 4:
                raise ExampleError(f"packed floats of {len(raw)} bytes (not a multiple of 4)")
            values.extend(struct.unpack(f"<{len(raw) // 4}f", raw))
        elif kind == 3 and wire == _LEN:  # packed varints
            pos = value[0]
            while pos < value[1]:
                number, pos = _varint(buf, pos, value[1])
                values.append(_signed64(number))
        elif kind == 3 and wire == _VARINT:
            values.append(_signed64(value))
        else:
            raise ExampleError(f"list kind {kind} has a value of wire type {wire}")
    return values


def _feature_values(buf: bytes, spans: list[tuple[int, int]]) -> list:
    """A Feature's list, with protobuf's merge rules (as tf.train.Example.FromString reads it):
    occurrences of the same list kind, within one Feature or across repeated ones, concatenate;
    a different kind replaces what came before (`kind` is a oneof: the last one wins)."""
    kind, values = None, []
    for start, end in spans:
        for number, wire, span in _fields(buf, start, end):
            if number not in (1, 2, 3):
                continue
            if wire != _LEN:
                raise ExampleError(f"feature list {number} has wire type {wire}, not a message")
            if number != kind:
                kind, values = number, []
            values += _list_values(buf, number, *span)
    return values


def parse_example(blob: bytes) -> dict[str, list]:
    """A serialized tf.train.Example → {feature key: list of bytes | floats | ints}, read as
    protobuf reads it: repeated `features` messages merge, and a key that occurs again in the
    map replaces its earlier value. Malformed bytes raise ExampleError."""
    entries: dict[str, list[tuple[int, int]]] = {}
    for number, wire, span in _fields(blob, 0, len(blob)):
        if number != 1 or wire != _LEN:
            continue
        for entry_number, entry_wire, (entry_start, entry_end) in _fields(blob, *span):
            if entry_number != 1 or entry_wire != _LEN:
                continue
            key, values = "", []
            for part, part_wire, value in _fields(blob, entry_start, entry_end):
                if part_wire != _LEN:
                    continue
                if part == 1:
                    key = bytes(blob[value[0] : value[1]]).decode(errors="replace")
                elif part == 2:
                    values.append(value)  # a value field seen twice merges
            entries[key] = values
    return {key: _feature_values(blob, spans) for key, spans in entries.items()}


@dataclass(frozen=True)
class ImageRecord:
    jpeg: bytes
    label: int
    height: int  # 0 when the writer left it out
    width: int
    filename: str


def image_record(blob: bytes) -> ImageRecord:
    """The image fields of training.data.records' schema from one serialized Example."""
    features = parse_example(blob)
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
