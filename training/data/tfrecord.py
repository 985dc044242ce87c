"""TFRecord files, without TensorFlow: their framing, written and read with both checksums.

Per record (TensorFlow's record format, tensorflow/tensorflow core/lib/io/record_writer.cc):
uint64 length (little-endian), uint32 masked CRC-32C of the length, the data, uint32 masked
CRC-32C of the data; masked_crc = ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32. A bad
checksum is a `TrainingError` naming the file, the record and its byte offset.
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
