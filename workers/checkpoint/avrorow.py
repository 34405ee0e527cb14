"""Decoding the Avro binary Spark's state store writes with ``encodingFormat=avro``.

Spark turns a row into Avro with the schema ``SchemaConverters.toAvroTypeWithDefaults`` derives
from the Catalyst schema (spark-avro), and writes it with Avro's binary encoder (no header, no
schema: the reader must know it). That derivation, which this module follows:

- the top-level struct is a record; every field of a record is a union of null (branch 0) and
  the field's type (branch 1), so that each field can default to null; a nested struct, an
  array and a map are themselves such unions, and a field of type null is just null;
- array items and map values are the element's type as derived here: an atomic element is not
  wrapped in a union, a struct, array or map element is;
- boolean: one byte; byte, short, int, date (days): an int; long, timestamp, timestamp_ntz
  (microseconds): a long; ints and longs are zigzag varints; float and double: 4 and 8 bytes,
  little-endian; string and binary: a long length, then the bytes; decimal: a fixed of the
  fewest bytes that hold its precision, the unscaled value big-endian two's complement;
- an array or a map is a sequence of blocks: a long count (negative: its absolute value, then
  the block's size in bytes), the items (a map's each a string key and the value), ending
  with a count of 0.

Bad bytes raise CorruptFileError naming the file, the field and the byte offset.
"""

from __future__ import annotations

import struct
from typing import Any

from .errors import CorruptFileError
from .sparktypes import ArrayType, DataType, DecimalType, MapType, StructType, UserDefinedType
from .unsaferow import python_value

_MAX_VARINT_BYTES = 10  # a 64-bit zigzag varint
_INT_TYPES = frozenset({"byte", "short", "integer", "long", "date", "timestamp", "timestamp_ntz"})
_FLOATS = {"float": struct.Struct("<f"), "double": struct.Struct("<d")}
_NULL_BRANCH, _VALUE_BRANCH = 0, 1


def decode_avro_record(
    data: bytes, schema: StructType, *, source: str, what: str = "state row", start: int = 0
) -> dict[str, Any]:
    """Decode ``data[start:]``, one top-level record of ``schema``; every byte must belong to it."""
    reader = _AvroReader(data, source, what, start)
    record = reader.record(schema, "")
    if reader.pos != len(data):
        raise reader.corrupt("", f"{len(data) - reader.pos} bytes left after the record")
    return record


def decimal_bytes(precision: int) -> int:
    """Bytes of the fixed Spark writes a decimal of ``precision`` digits in (minBytesForPrecision)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


class _AvroReader:
    def __init__(self, data: bytes, source: str, what: str, start: int) -> None:
        self.data, self.source, self.what, self.pos = data, source, what, start

    def corrupt(self, path: str, reason: str) -> CorruptFileError:
        where = f" field {path!r}" if path else ""
        return CorruptFileError(self.source, f"Avro {self.what}{where}: {reason}", offset=self.pos)

    def record(self, schema: StructType, path: str) -> dict[str, Any]:
        return {f.name: self.field(f.data_type, f"{path}.{f.name}" if path else f.name) for f in schema.fields}

    def field(self, data_type: DataType, path: str) -> Any:
        """A record field, or a struct, array or map element: a union of null and the value."""
        if getattr(data_type, "name", "") == "void":
            return None
        branch = self.long(path)
        if branch == _NULL_BRANCH:
            return None
        if branch != _VALUE_BRANCH:
            raise self.corrupt(path, f"union branch {branch}, expected 0 (null) or 1")
        return self.value(data_type, path)

    def element(self, data_type: DataType, path: str) -> Any:
        if isinstance(data_type, StructType | ArrayType | MapType):
            return self.field(data_type, path)
        if isinstance(data_type, UserDefinedType):
            return self.element(data_type.sql_type, path)
        return None if getattr(data_type, "name", "") == "void" else self.value(data_type, path)

    def value(self, data_type: DataType, path: str) -> Any:
        if isinstance(data_type, UserDefinedType):
            return self.value(data_type.sql_type, path)
        if isinstance(data_type, StructType):
            return self.record(data_type, path)
        if isinstance(data_type, ArrayType):
            return [self.element(data_type.element_type, f"{path}[]") for _ in self.blocks(path)]
        if isinstance(data_type, MapType):
            return [(self.text(f"{path}{{key}}"), self.element(data_type.value_type, path)) for _ in self.blocks(path)]
        if isinstance(data_type, DecimalType):
            raw = self.take(decimal_bytes(data_type.precision), path)
            return python_value(int.from_bytes(raw, "big", signed=True), data_type)
        return self.atomic(data_type.name, data_type, path)

    def atomic(self, name: str, data_type: DataType, path: str) -> Any:
        if name in _INT_TYPES:
            return python_value(self.long(path), data_type)
        if name in _FLOATS:
            codec = _FLOATS[name]
            return codec.unpack(self.take(codec.size, path))[0]
        if name == "boolean":
            flag = self.take(1, path)[0]
            if flag > 1:
                raise self.corrupt(path, f"boolean byte {flag}")
            return flag == 1
        if name == "string":
            return self.text(path)
        if name == "binary":
            return self.take(self.size(path), path)
        raise self.corrupt(path, f"type {name!r} has no Avro encoding in Spark's state store")

    def blocks(self, path: str):
        """Yield once per item of an array or map, reading its block counts."""
        while (count := self.long(path)) != 0:
            if count < 0:
                count = -count
                self.size(path)  # the block's byte size: not needed to read it
            for _ in range(count):
                yield

    def text(self, path: str) -> str:
        return self.take(self.size(path), path).decode("utf-8", "replace")

    def size(self, path: str) -> int:
        size = self.long(path)
        if size < 0:
            raise self.corrupt(path, f"negative length {size}")
        return size

    def take(self, count: int, path: str) -> bytes:
        if count > len(self.data) - self.pos:
            raise self.corrupt(path, f"{count} bytes announced, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def long(self, path: str) -> int:
        """A zigzag varint (Avro's int and long)."""
        unsigned, shift = 0, 0
        for _ in range(_MAX_VARINT_BYTES):
            if self.pos >= len(self.data):
                raise self.corrupt(path, "the bytes end inside a number")
            byte = self.data[self.pos]
            self.pos += 1
            unsigned |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (unsigned >> 1) ^ -(unsigned & 1)
            shift += 7
        raise self.corrupt(path, f"a number longer than {_MAX_VARINT_BYTES} bytes")
