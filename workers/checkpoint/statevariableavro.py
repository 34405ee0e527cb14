"""Keys and values of a transformWithState variable written with ``encodingFormat=avro``.

AvroStateEncoder (RocksDBStateEncoder.scala) writes, after the 2-byte family id::

    value, NoPrefixKeyStateEncoderSpec key
        version byte 0, schema id (int16, host order), Avro record of the value or key schema
    PrefixKeyScanStateEncoderSpec key (statekeylayout.py's framing)
        prefix: version byte, Avro record of the first numColsPrefixKey fields (no schema id)
        rest:   version byte, schema id, Avro record of the other fields
    RangeKeyScanStateEncoderSpec key
        range part: version byte, Avro record of two binaries per ordering field (its marker
                    byte, then its big-endian value: statekeylayout.ordered_value)
        rest:       as a prefix key's rest, when fields remain

The schema id names the schema the row was written with (``keySchemaId`` / ``valueSchemaId``
of the family in a state schema v3 file): rows written before a schema evolved are read with
the schema of their time, as Spark's reader does. Avro records: avrorow.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .avrorow import decode_avro_record
from .errors import CorruptFileError
from .rocksdbrows import strip_encoding_version
from .sparktypes import AtomicType, StructField, StructType
from .statekeylayout import fields_at, fields_except, in_schema_order, ordered_value, split_prefixed
from .statevariables import StateVariable

SCHEMA_ID_BYTES = 2  # StateStoreColumnFamilySchemaUtils' SCHEMA_ID_PREFIX_BYTES
# (family name, is key, schema id) -> the schema that id stands for.
WriterSchemas = Mapping[tuple[str, bool, int], StructType]


def decode_avro_key(data: bytes, variable: StateVariable, writers: WriterSchemas, *, source: str) -> dict[str, Any]:
    """Decode a key (without its family id) with the family's key encoder spec."""
    spec = variable.schema.key_state_encoder_spec or {}
    encoder = spec.get("keyStateEncoderType")
    if encoder == "PrefixKeyScanStateEncoderSpec":
        return _prefix_key(data, variable, writers, int(spec.get("numColsPrefixKey", 0)), source)
    if encoder == "RangeKeyScanStateEncoderSpec":
        return _range_key(data, variable, writers, [int(n) for n in spec.get("orderingOrdinals", [])], source)
    return _with_schema_id(data, variable, writers, True, source, lambda s: s)


def _prefix_key(data, variable, writers, count: int, source: str) -> dict[str, Any]:
    """The first ``count`` fields (the prefix, without a schema id), then the others."""
    first, rest = split_prefixed(data, source)
    schema = variable.schema.key_schema
    prefix = decode_avro_record(_unversioned(first, source), fields_at(schema, range(count)), source=source, what="key")
    others = _with_schema_id(rest, variable, writers, True, source, lambda s: fields_except(s, range(count)))
    return {**prefix, **others}


def decode_avro_value(data: bytes, variable: StateVariable, writers: WriterSchemas, *, source: str) -> dict[str, Any]:
    return _with_schema_id(data, variable, writers, False, source, lambda s: s)


def _with_schema_id(data, variable, writers, is_key: bool, source: str, part) -> dict[str, Any]:
    """A version byte, a schema id and the Avro record of ``part`` of the schema it names."""
    body = _unversioned(data, source)
    if len(body) < SCHEMA_ID_BYTES:
        raise CorruptFileError(source, f"an Avro {_what(is_key)} of {len(data)} bytes has no schema id")
    schema_id = int.from_bytes(body[:SCHEMA_ID_BYTES], "little", signed=True)
    schema = writers.get((variable.name, is_key, schema_id))
    if schema is None:
        raise CorruptFileError(
            source, f"{_what(is_key)} schema id {schema_id} of {variable.name!r} is in no state schema file", offset=1
        )
    return decode_avro_record(body, part(schema), source=source, what=_what(is_key), start=SCHEMA_ID_BYTES)


def _range_key(data, variable, writers, ordinals: list[int], source: str) -> dict[str, Any]:
    """The ordering fields from their markers and big-endian bytes, then the others."""
    schema = variable.schema.key_schema
    first, rest = split_prefixed(data, source)
    values = _ordering_values(first, fields_at(schema, ordinals), source)
    if rest:
        values.update(_with_schema_id(rest, variable, writers, True, source, lambda s: fields_except(s, ordinals)))
    return in_schema_order(schema, values)


def _ordering_values(first: bytes, ordered: StructType, source: str) -> dict[str, Any]:
    """The ``ordered`` fields' values, each from its marker and big-endian bytes in the key's first part."""
    raw = decode_avro_record(_unversioned(first, source), _marker_value_pairs(ordered), source=source, what="range key")
    return {
        f.name: ordered_value(_marker(raw[f"{f.name}#m"]), raw[f"{f.name}#v"] or b"", f, source) for f in ordered.fields
    }


def _marker_value_pairs(ordered: StructType) -> StructType:
    """The record of a range key's ordering part: a marker and a value (both bytes) per ordering field."""
    return StructType(
        tuple(StructField(f"{f.name}{half}", AtomicType("binary")) for f in ordered.fields for half in ("#m", "#v"))
    )


def _marker(raw: bytes | None) -> int | None:
    return raw[0] if raw else None


def _unversioned(data: bytes, source: str) -> bytes:
    return strip_encoding_version(data, source=source, what="state row")


def _what(is_key: bool) -> str:
    return "key" if is_key else "value"
