"""The `tf.train.Example` codec: a serialized Example to {feature key: list of values} and back.

Decoded straight from protobuf's wire format (tensorflow/core/example/{example,feature}.proto:
Example {Features features = 1}, Features {map<string, Feature> feature = 1}, Feature oneof
{BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3}, each list a
`repeated` field 1, numbers packed), so neither TensorFlow nor protobuf is needed; encoded the
same way (int64 lists packed, as proto3 packs them).
"""

import struct

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


def decode_example(blob: bytes) -> dict[str, list]:
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


# --- encoding ------------------------------------------------------------------------------------


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
