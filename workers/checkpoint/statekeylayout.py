"""The byte layout transformWithState key encoders share, whatever encodes the rows.

RocksDBStateEncoder.scala (every int in host order, little-endian): a prefix-scan or range-scan
key is an int32 size, the first part (the prefix fields, or the range fields) of that size,
then the other fields. A range field is a marker byte (0 negative, 1 positive, 2 null) and its
value big-endian, a negative float or double with all bits flipped, so that RocksDB's byte
order is the numbers' order. A timestamp key (join state format 4, TimestampKeyStateEncoder) is
the key without its event time, with the event time as 8 bytes big-endian, sign bit flipped,
before it (TimestampAsPrefix) or after it (TimestampAsPostfix).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from .errors import CorruptFileError
from .sparktypes import StructField, StructType

_PREFIX_SIZE = struct.Struct("<i")
_NULL_MARKER, _NEGATIVE_MARKER = 2, 0
_BIG_ENDIAN = {"byte": ">b", "short": ">h", "integer": ">i", "long": ">q", "float": ">f", "double": ">d"}
_FLIP = {"float": (">I", 0xFFFFFFFF), "double": (">Q", 0xFFFFFFFFFFFFFFFF)}
_EVENT_TIME = struct.Struct(">Q")
_SIGN_BIT = 1 << 63
# Timestamp key encoder -> whether the event time comes first.
TIMESTAMP_KEY_ENCODERS = {"TimestampAsPrefixKeyStateEncoderSpec": True, "TimestampAsPostfixKeyStateEncoderSpec": False}


def split_prefixed(data: bytes, source: str) -> tuple[bytes, bytes]:
    """(first part, the rest) of a prefix-scan or range-scan key."""
    if len(data) < _PREFIX_SIZE.size:
        raise CorruptFileError(source, f"a prefixed key of {len(data)} bytes has no prefix size")
    size = _PREFIX_SIZE.unpack_from(data)[0]
    if not 0 < size <= len(data) - _PREFIX_SIZE.size:
        raise CorruptFileError(source, f"a key's prefix size {size} does not fit its {len(data)} bytes")
    end = _PREFIX_SIZE.size + size
    return data[_PREFIX_SIZE.size : end], data[end:]


def split_timestamped(data: bytes, *, prefix: bool, source: str) -> tuple[int, bytes]:
    """(event time, the other key fields' bytes) of a timestamp key."""
    if len(data) < _EVENT_TIME.size:
        raise CorruptFileError(source, f"a timestamp key of {len(data)} bytes has no event time")
    cut = _EVENT_TIME.size if prefix else len(data) - _EVENT_TIME.size
    raw, rest = (data[:cut], data[cut:]) if prefix else (data[cut:], data[:cut])
    flipped = _EVENT_TIME.unpack(raw)[0] ^ _SIGN_BIT
    return flipped - (1 << 64) if flipped >= _SIGN_BIT else flipped, rest


def ordered_value(marker: int | None, body: bytes, field: StructField, source: str) -> Any:
    """The value of a range field from its marker and big-endian bytes (None for null)."""
    type_name = getattr(field.data_type, "name", "")
    if marker is None or marker == _NULL_MARKER or type_name not in _BIG_ENDIAN:
        return None
    fmt = _BIG_ENDIAN[type_name]
    if len(body) < struct.calcsize(fmt):
        raise CorruptFileError(source, f"an ordering field {field.name!r} of {len(body)} bytes is cut short")
    if marker == _NEGATIVE_MARKER and type_name in _FLIP:
        unsigned, mask = _FLIP[type_name]
        body = struct.pack(unsigned, struct.unpack_from(unsigned, body)[0] ^ mask)
    return struct.unpack_from(fmt, body)[0]


def fields_at(schema: StructType, ordinals: Iterable[int]) -> StructType:
    return StructType(tuple(schema.fields[n] for n in ordinals))


def fields_except(schema: StructType, ordinals: Iterable[int]) -> StructType:
    taken = set(ordinals)
    return StructType(tuple(f for n, f in enumerate(schema.fields) if n not in taken))


def in_schema_order(schema: StructType, values: dict[str, Any]) -> dict[str, Any]:
    return {name: values.get(name) for name in schema.names}
