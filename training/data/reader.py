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

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def _fields(buf: bytes, pos: int, end: int):
    """(field number, wire type, value) of a message in buf[pos:end]; LEN values as (start, end)."""
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            value, pos = (pos, pos + length), pos + length
        elif wire == _FIXED32:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == _FIXED64:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("field runs past the end of its message")
        yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature_values(buf: bytes, start: int, end: int) -> list:
    """A Feature's list: bytes, floats or ints."""
    for kind, _, (list_start, list_end) in _fields(buf, start, end):
        values: list = []
        for _, wire, value in _fields(buf, list_start, list_end):
            if kind == 1:  # BytesList
                values.append(bytes(buf[value[0] : value[1]]))
            elif kind == 2:  # FloatList: packed (LEN) or one fixed32
                raw = buf[value[0] : value[1]] if wire == _LEN else value
                values.extend(struct.unpack(f"<{len(raw) // 4}f", raw))
            elif kind == 3 and wire == _LEN:  # Int64List, packed
                pos = value[0]
                while pos < value[1]:
                    number, pos = _varint(buf, pos)
                    values.append(_signed64(number))
            elif kind == 3:
                values.append(_signed64(value))
        return values
    return []  # an empty Feature


def parse_example(blob: bytes) -> dict[str, list]:
    """A serialized tf.train.Example → {feature key: list of bytes | floats | ints}."""
    features: dict[str, list] = {}
    for number, _, (start, end) in _fields(blob, 0, len(blob)):
        if number != 1:
            continue
        for entry_number, _, (entry_start, entry_end) in _fields(blob, start, end):
            if entry_number != 1:
                continue
            key, value = "", (0, 0)
            for part, _, span in _fields(blob, entry_start, entry_end):
                if part == 1:
                    key = bytes(blob[span[0] : span[1]]).decode()
                elif part == 2:
                    value = span
            features[key] = _feature_values(blob, *value)
    return features


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
        raise ValueError("not an image record: image/encoded or image/class/label is missing")

    def first(key, default):
        values = features.get(key) or [default]
        return values[0]

    return ImageRecord(
        jpeg=first("image/encoded", b""),
        label=int(first("image/class/label", -1)),
        height=int(first("image/height", 0)),
        width=int(first("image/width", 0)),
        filename=first("image/filename", b"").decode(errors="replace"),
    )
