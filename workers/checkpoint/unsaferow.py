"""Decoding Spark's UnsafeRow, the binary form of state store keys and values.

Layout (UnsafeRow.java; every integer little-endian, the byte order of x86 and ARM hosts)::

    [null bits: ((n + 63) // 64) 64-bit words][n slots of 8 bytes][variable-length region]

Bit i set means field i is null. A fixed-width value sits in its slot, zero-padded: boolean
and byte (1 byte), short (2), int, date (days since 1970-01-01), float, year-month interval
(4), long, double, timestamp / timestamp_ntz (microseconds since the epoch), day-time interval
(microseconds) and decimal of precision <= 18 (the unscaled long) (8). Any other value's slot
holds ``offset << 32 | size``, the offset counted from the start of the row: string (UTF-8),
binary, decimal of precision > 18 (big-endian two's-complement unscaled value), calendar
interval (int months, int days, long microseconds), struct (a nested UnsafeRow), array and map.

An array (UnsafeArrayData) is an 8-byte element count, null bits as above, the elements at a
fixed width (the width of their type, or 8-byte offset-and-size slots counted from the array's
start) padded to 8 bytes, then variable-length data. A map (UnsafeMapData) is the 8-byte size
of its key array, the key array, then the value array.

Every offset and size is checked against the bytes of the enclosing row, array or map before
it is followed (the rules of UnsafeRowUtils.validateStructuralIntegrity); a row that breaks one
raises CorruptFileError with the byte offset. A type this module does not know (a type added by
a later Spark) is shown as the hex of its slot, never as an error.
"""

from __future__ import annotations

import datetime
import struct
from decimal import Decimal
from typing import Any, NamedTuple

from .errors import CorruptFileError
from .sparktypes import (
    MAX_LONG_DIGITS,
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructType,
    UserDefinedType,
)

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")
_CALENDAR_INTERVAL = struct.Struct("<iiq")
_MAX_DECIMAL_BYTES = 16  # 38 digits fit in 16 bytes of two's complement
_STRING_LIKE_PREFIXES = ("char(", "varchar(", "string collate")


class _Fixed(NamedTuple):
    width: int
    fmt: str  # struct format of the value's bytes


# Fixed-width atomic types by JSON name. Day-time and year-month intervals are added below.
_FIXED_TYPES = {
    "boolean": _Fixed(1, "<?"),
    "byte": _Fixed(1, "<b"),
    "short": _Fixed(2, "<h"),
    "integer": _Fixed(4, "<i"),
    "date": _Fixed(4, "<i"),
    "float": _Fixed(4, "<f"),
    "long": _Fixed(8, "<q"),
    "double": _Fixed(8, "<d"),
    "timestamp": _Fixed(8, "<q"),
    "timestamp_ntz": _Fixed(8, "<q"),
}
_DECIMAL_FIXED = _Fixed(8, "<q")
_YEAR_MONTH = _Fixed(4, "<i")
_DAY_TIME = _Fixed(8, "<q")


def decode_unsafe_row(
    data: bytes, schema: StructType, *, source: str, offset: int = 0, what: str = "UnsafeRow"
) -> dict[str, Any]:
    """Decode one UnsafeRow into ``{field name: value}``, in schema order.

    A name that repeats (two ``sum`` buffers of one aggregation) is numbered: ``sum``, ``sum#2``.

    Values: int, float, bool, str (invalid UTF-8 replaced), bytes, Decimal, datetime.date,
    datetime.datetime (aware UTC for ``timestamp``, naive for ``timestamp_ntz``), timedelta
    (day-time interval), dict (struct, calendar interval), list (array), list of (key, value)
    pairs (map); None for null; a date or timestamp outside Python's range stays an int.
    ``offset`` (where the row starts in ``source``) and ``what`` (e.g. "key row") only go into
    messages. Raises CorruptFileError.
    """
    decoder = _Decoder(bytes(data), source, offset, what)
    if len(data) % 8:
        # UnsafeRow.pointTo asserts this; a row cut short usually breaks it first.
        raise decoder.corrupt("", f"a row of {len(data)} bytes, not a multiple of 8", 0)
    return decoder.struct(0, len(data), schema, "")


class _Decoder:
    """Reads values out of one row's bytes; positions are indexes into ``data``."""

    def __init__(self, data: bytes, source: str, offset: int, what: str) -> None:
        self.data, self.source, self.offset, self.what = data, source, offset, what

    def corrupt(self, what: str, reason: str, at: int) -> CorruptFileError:
        """Build the error for a problem in field ``what`` ('' for the row itself) at ``at``."""
        where = f", field {what!r}" if what else ""
        return CorruptFileError(self.source, f"{self.what}{where}: {reason}", offset=self.offset + at)

    def word(self, at: int) -> int:
        return _UINT64.unpack_from(self.data, at)[0]

    def is_null(self, start: int, index: int) -> bool:
        return bool(self.word(start + index // 64 * 8) >> (index % 64) & 1)

    def struct(self, start: int, size: int, schema: StructType, what: str) -> dict[str, Any]:
        """Decode the row of ``size`` bytes at ``start`` (the whole row or a nested struct)."""
        count = len(schema.fields)
        fixed_end = _bitset_bytes(count) + 8 * count
        if fixed_end > size:
            raise self.corrupt(what, f"{size} bytes cannot hold {count} fields", start)
        values, var_bytes = {}, 0
        for index, (name, field) in enumerate(zip(_unique_names(schema), schema.fields, strict=True)):
            slot_at = start + _bitset_bytes(count) + 8 * index
            path = f"{what}.{name}" if what else name
            if self.is_null(start, index):
                self.check_null_slot(slot_at, field.data_type, fixed_end, size, path)
                values[name] = None
                continue
            values[name], used = self.slot(start, size, fixed_end, slot_at, field.data_type, path)
            var_bytes += used
        if fixed_end + var_bytes > size:
            raise self.corrupt(what, f"fields need {fixed_end + var_bytes} bytes, the row has {size}", start)
        return values

    def check_null_slot(self, slot_at: int, data_type: DataType, fixed_end: int, size: int, path: str) -> None:
        slot = self.word(slot_at)
        if isinstance(data_type, DecimalType) and data_type.precision > MAX_LONG_DIGITS:
            # A null wide decimal may keep its offset (with size 0) so it can be set again.
            offset, length = slot >> 32, slot & 0xFFFFFFFF
            if length == 0 and (offset == 0 or fixed_end <= offset <= size):
                return
        elif slot == 0:
            return
        raise self.corrupt(path, f"null field with a non-zero slot {slot:#018x}", slot_at)

    def slot(self, start: int, size: int, fixed_end: int, slot_at: int, data_type: DataType, path: str):
        """Decode a non-null field from its slot; return the value and its variable-length bytes."""
        fixed = _fixed_type(data_type)
        if fixed is not None:
            if fixed.width < 8 and self.word(slot_at) >> (8 * fixed.width):
                raise self.corrupt(path, "non-zero padding in a fixed-width slot", slot_at)
            if fixed.fmt == "<?" and self.data[slot_at] > 1:
                raise self.corrupt(path, f"boolean byte {self.data[slot_at]}", slot_at)
            return self.fixed(slot_at, fixed, data_type), 0
        if not _is_variable(data_type):
            return self.data[slot_at : slot_at + 8].hex(), 0
        at, length = self.region(start, size, fixed_end, slot_at, path)
        return self.variable(at, length, data_type, path), length

    def region(self, start: int, size: int, data_start: int, slot_at: int, path: str) -> tuple[int, int]:
        """Follow an offset-and-size slot; check it points inside ``[data_start, size)`` of the container."""
        slot = self.word(slot_at)
        offset, length = slot >> 32, slot & 0xFFFFFFFF
        if offset < data_start or offset + length > size:
            raise self.corrupt(
                path, f"offset {offset} and size {length} fall outside the {size}-byte container", slot_at
            )
        return start + offset, length

    def fixed(self, at: int, fixed: _Fixed, data_type: DataType) -> Any:
        (raw,) = struct.unpack_from(fixed.fmt, self.data, at)
        return python_value(raw, data_type)

    def variable(self, at: int, length: int, data_type: DataType, path: str) -> Any:
        """Decode a variable-length value of ``length`` bytes at ``at``."""
        if isinstance(data_type, UserDefinedType):
            return self.variable(at, length, data_type.sql_type, path)
        if isinstance(data_type, StructType):
            return self.struct(at, length, data_type, path)
        if isinstance(data_type, ArrayType):
            return self.array(at, length, data_type.element_type, path)
        if isinstance(data_type, MapType):
            return self.map(at, length, data_type, path)
        if isinstance(data_type, DecimalType):
            return self.wide_decimal(at, length, data_type, path)
        if data_type.name == "interval":
            return self.calendar_interval(at, length, path)
        raw = self.data[at : at + length]
        return raw if data_type.name == "binary" else raw.decode("utf-8", "replace")

    def wide_decimal(self, at: int, length: int, data_type: DecimalType, path: str) -> Decimal:
        if not 0 < length <= _MAX_DECIMAL_BYTES:
            raise self.corrupt(path, f"decimal of {length} bytes", at)
        unscaled = int.from_bytes(self.data[at : at + length], "big", signed=True)
        return _decimal(unscaled, data_type.scale)

    def calendar_interval(self, at: int, length: int, path: str) -> dict[str, int]:
        if length != _CALENDAR_INTERVAL.size:
            raise self.corrupt(path, f"calendar interval of {length} bytes, expected 16", at)
        months, days, microseconds = _CALENDAR_INTERVAL.unpack_from(self.data, at)
        return {"months": months, "days": days, "microseconds": microseconds}

    def array(self, start: int, size: int, element_type: DataType, path: str) -> list[Any] | str:
        """Decode an UnsafeArrayData of ``size`` bytes at ``start``."""
        count, values_at, width = self.array_header(start, size, element_type, path)
        if width is None:
            return self.data[start : start + size].hex()  # elements of a type we do not know
        fixed = _fixed_type(element_type)
        values = []
        for index in range(count):
            at = values_at + index * width
            if self.is_null(start + 8, index):
                values.append(None)
            elif fixed is not None:
                values.append(self.fixed(at, fixed, element_type))
            else:
                element_at, length = self.region(start, size, values_at - start, at, f"{path}[{index}]")
                values.append(self.variable(element_at, length, element_type, f"{path}[{index}]"))
        return values

    def array_header(self, start: int, size: int, element_type: DataType, path: str):
        """Check an array's header; return its element count, where elements start, their width."""
        if size < 8:
            raise self.corrupt(path, f"array of {size} bytes has no element count", start)
        count = _INT64.unpack_from(self.data, start)[0]
        width = _element_width(element_type)
        header = 8 + _bitset_bytes(max(count, 0))
        if count < 0 or header + _round_up_8(count * (width or 0)) > size:
            raise self.corrupt(path, f"array of {size} bytes cannot hold {count} elements", start)
        return count, start + header, width

    def map(self, start: int, size: int, data_type: MapType, path: str) -> list[tuple[Any, Any]] | str:
        """Decode an UnsafeMapData: keys and values as a list of pairs, in stored order."""
        keys_size = _INT64.unpack_from(self.data, start)[0] if size >= 8 else -1
        if not 0 <= keys_size <= size - 8:
            raise self.corrupt(path, f"map of {size} bytes with a key array of {keys_size} bytes", start)
        keys = self.array(start + 8, keys_size, data_type.key_type, f"{path}.keys")
        values_size = size - 8 - keys_size
        values = self.array(start + 8 + keys_size, values_size, data_type.value_type, f"{path}.values")
        if isinstance(keys, str) or isinstance(values, str):
            return self.data[start : start + size].hex()
        if len(keys) != len(values):
            raise self.corrupt(path, f"map with {len(keys)} keys and {len(values)} values", start)
        return list(zip(keys, values, strict=True))


def _unique_names(schema: StructType) -> list[str]:
    """Field names with repeats numbered: an aggregation's buffer holds e.g. two "sum" fields."""
    seen: dict[str, int] = {}
    names = []
    for name in schema.names:
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return names


def _bitset_bytes(count: int) -> int:
    return (count + 63) // 64 * 8


def _round_up_8(size: int) -> int:
    return (size + 7) // 8 * 8


def _fixed_type(data_type: DataType) -> _Fixed | None:
    """The width and format of a fixed-width type, or None (variable-length or unknown)."""
    if isinstance(data_type, DecimalType):
        return _DECIMAL_FIXED if data_type.precision <= MAX_LONG_DIGITS else None
    if isinstance(data_type, UserDefinedType):
        return _fixed_type(data_type.sql_type)
    if not isinstance(data_type, AtomicType):
        return None
    if data_type.name.startswith(("interval year", "interval month")):
        return _YEAR_MONTH
    if data_type.name.startswith("interval "):
        return _DAY_TIME
    return _FIXED_TYPES.get(data_type.name)


def _is_variable(data_type: DataType) -> bool:
    """Tell whether the type is a known variable-length one (its slot is offset and size)."""
    if not isinstance(data_type, AtomicType):
        return True  # struct, array, map, wide decimal, or a UDT over one of them
    name = data_type.name
    return name in ("string", "binary", "interval") or name.startswith(_STRING_LIKE_PREFIXES)


def _element_width(data_type: DataType) -> int | None:
    """Bytes per array element: the fixed width, 8 for offset-and-size slots, None if unknown."""
    fixed = _fixed_type(data_type)
    if fixed is not None:
        return fixed.width
    return 8 if _is_variable(data_type) else None


def python_value(raw: Any, data_type: DataType) -> Any:
    """Turn the raw number of a fixed-width slot into the Python value of its type."""
    if isinstance(data_type, DecimalType):
        return _decimal(raw, data_type.scale)
    name = getattr(data_type, "name", "")
    try:
        if name == "date":
            return _EPOCH_DATE + datetime.timedelta(days=raw)
        if name == "timestamp":
            return _EPOCH_UTC + datetime.timedelta(microseconds=raw)
        if name == "timestamp_ntz":
            return _EPOCH + datetime.timedelta(microseconds=raw)
        if name.startswith("interval ") and not name.startswith(("interval year", "interval month")):
            return datetime.timedelta(microseconds=raw)
    except OverflowError:
        return raw  # outside Python's years 1-9999; Spark allows it
    return raw


def _decimal(unscaled: int, scale: int) -> Decimal:
    # The tuple form is exact: no rounding to the context's 28 digits.
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))
