"""Decoded rows of one transformWithState state variable, UnsafeRow or Avro encoded.

After the 2-byte family id (rocksdbcfrows.py), a key is what the family's key encoder wrote
(RocksDBStateEncoder.scala; framing of prefix and range keys: statekeylayout.py). With the
default UnsafeRow encoding::

    NoPrefixKeyStateEncoderSpec     version byte 0, UnsafeRow of the key schema
    PrefixKeyScanStateEncoderSpec   prefix: version byte, UnsafeRow of the first
                                    numColsPrefixKey fields; then the rest likewise
    RangeKeyScanStateEncoderSpec    version byte, UnsafeRow whose fields are the
                                    orderingOrdinals fields as binary (marker and big-endian
                                    value), then the other fields as version byte and UnsafeRow

A value is a version byte and the UnsafeRow of the value schema. With
``spark.sql.streaming.stateStore.encodingFormat=avro`` (offset log conf) keys and values are
Avro records behind a schema id (statevariableavro.py). A ListState's value is a list of such
values (rocksdbcfrows.split_list_value). A MapState's key is (grouping key, user key), prefix
encoded; its rows show as grouping key, user key -> value.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from .errors import CheckpointError
from .rocksdbcfrows import open_column_family_rows, split_list_value
from .rocksdbrows import strip_encoding_version
from .sparktypes import AtomicType, StructField, StructType
from .stateinventory import StateStoreDir
from .statekeylayout import (
    TIMESTAMP_KEY_ENCODERS,
    fields_at,
    fields_except,
    in_schema_order,
    ordered_value,
    split_prefixed,
    split_timestamped,
)
from .statevariableavro import WriterSchemas, decode_avro_key, decode_avro_value
from .statevariables import LIST_KINDS, StateVariable
from .unsaferow import decode_unsafe_row

if TYPE_CHECKING:
    from .storage.checkpointstorage import CheckpointStorage

ENCODING_FORMAT_CONF = "spark.sql.streaming.stateStore.encodingFormat"
UNSAFE_ROW_ENCODING = "unsaferow"  # Spark's default
AVRO_ENCODING = "avro"
DECODED_KEY_ENCODERS = (
    None,
    "NoPrefixKeyStateEncoderSpec",
    "PrefixKeyScanStateEncoderSpec",
    "RangeKeyScanStateEncoderSpec",
    *TIMESTAMP_KEY_ENCODERS,
)


class UndecodedEncodingError(CheckpointError):
    """The store's rows are in an encoding this reader counts but does not decode."""


@dataclass(frozen=True, slots=True)
class DecodedVariableRow:
    """One row of a variable: grouping key (for timers and TTL indexes: the whole key), the user
    key of a MapState (else None), the value (a dict, a list of dicts for a ListState) and
    the file it came from."""

    key: dict[str, Any]
    user_key: dict[str, Any] | None
    value: Any
    source: str


def sample_state_variable_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    variable: StateVariable,
    *,
    limit: int,
    codec: str | None,
    encoding: str | None,
    writer_schemas: WriterSchemas | None = None,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
) -> list[DecodedVariableRow]:
    """Decode up to ``limit`` rows of ``variable`` at ``version``.

    ``writer_schemas`` (Avro) holds the schemas of every schema id rows may name
    (statevariables.read_writer_schemas); without it, only the variable's newest ids.
    Raises UndecodedEncodingError for an encoding other than UnsafeRow and Avro,
    CheckpointError for a variable without a schema, and as
    rocksdbcfrows.open_column_family_rows; CorruptFileError names the file of a row that does
    not decode.
    """
    if variable.schema is None:
        raise CheckpointError(store.path, f"no state schema file describes {variable.name!r}")
    encoding = _encoding(encoding, store)
    if (reason := undecoded_reason(variable, encoding)) is not None:
        raise UndecodedEncodingError(store.path, reason)
    decoder = _RowDecoder(variable, encoding, writer_schemas or own_writer_schemas(variable))
    with open_column_family_rows(
        storage, store, version, codec=codec, unique_id=unique_id, max_read_bytes=max_read_bytes
    ) as families:
        ids = [number for number, name in families.names.items() if name == variable.name]
        rows = (row for row in families.rows if row.family_id in ids)
        return list(islice(map(decoder.decode, rows), limit))


def undecoded_reason(variable: StateVariable, encoding: str = UNSAFE_ROW_ENCODING) -> str | None:
    """Why the variable's keys are counted but not decoded (a key encoder this reader does not
    know), or None. Timestamp keys are decoded as UnsafeRows only: Spark 4.3 writes them for
    joins, which refuse the Avro encoding."""
    encoder = (variable.schema and variable.schema.key_state_encoder_spec or {}).get("keyStateEncoderType")
    if encoder in TIMESTAMP_KEY_ENCODERS and encoding == AVRO_ENCODING:
        return f"keys of {variable.name!r} are Avro-encoded by {encoder}: counted, not decoded"
    if encoder in DECODED_KEY_ENCODERS:
        return None
    return f"keys of {variable.name!r} are written by {encoder}: counted, not decoded"


def _encoding(encoding: str | None, store: StateStoreDir) -> str:
    name = (encoding or UNSAFE_ROW_ENCODING).lower()
    if name not in (UNSAFE_ROW_ENCODING, AVRO_ENCODING):
        raise UndecodedEncodingError(
            store.path, f"rows are {encoding}-encoded ({ENCODING_FORMAT_CONF}): counted, not decoded"
        )
    return name


def own_writer_schemas(variable: StateVariable) -> dict[tuple[str, bool, int], StructType]:
    """The schemas of the variable's newest key and value schema ids."""
    schema = variable.schema
    return {
        (variable.name, True, schema.key_schema_id): schema.key_schema,
        (variable.name, False, schema.value_schema_id): schema.value_schema,
    }


@dataclass(frozen=True, slots=True)
class _RowDecoder:
    variable: StateVariable
    encoding: str
    writers: WriterSchemas

    def decode(self, row: Any) -> DecodedVariableRow:
        key = self.key(row.key, row.source)
        user_key = None
        if self.variable.kind == "MapState" and set(key) == {"key", "userKey"}:
            key, user_key = key["key"], key["userKey"]
        return DecodedVariableRow(key, user_key, self.value(row.value, row.source), row.source)

    def key(self, data: bytes, source: str) -> dict[str, Any]:
        if self.encoding == AVRO_ENCODING:
            return decode_avro_key(data, self.variable, self.writers, source=source)
        return decode_unsafe_row_key(data, self.variable, source=source)

    def value(self, data: bytes, source: str) -> Any:
        """A dict, or for a ListState the list of its elements' dicts."""
        if self.variable.kind in LIST_KINDS:
            return [self.one_value(element, source) for element in split_list_value(data, source=source)]
        return self.one_value(data, source)

    def one_value(self, data: bytes, source: str) -> dict[str, Any]:
        if self.encoding == AVRO_ENCODING:
            return decode_avro_value(data, self.variable, self.writers, source=source)
        return _row(data, self.variable.schema.value_schema, source)


def decode_unsafe_row_key(data: bytes, variable: StateVariable, *, source: str) -> dict[str, Any]:
    """Decode an UnsafeRow key (without its family id) with the family's key schema and encoder spec."""
    schema, spec = variable.schema.key_schema, variable.schema.key_state_encoder_spec or {}
    encoder = spec.get("keyStateEncoderType")
    if encoder == "PrefixKeyScanStateEncoderSpec":
        count = int(spec.get("numColsPrefixKey", 0))
        first, rest = split_prefixed(data, source)
        return {
            **_row(first, fields_at(schema, range(count)), source),
            **_row(rest, fields_except(schema, range(count)), source),
        }
    if encoder == "RangeKeyScanStateEncoderSpec":
        return _range_key(data, schema, [int(n) for n in spec.get("orderingOrdinals", [])], source)
    if encoder in TIMESTAMP_KEY_ENCODERS:
        return _timestamp_key(data, schema, TIMESTAMP_KEY_ENCODERS[encoder], source)
    return _row(data, schema, source)


def _timestamp_key(data: bytes, schema: StructType, prefix: bool, source: str) -> dict[str, Any]:
    """The key's fields, then its event time: the schema's last field (`__event_time`, which
    TimestampKeyStateEncoder appends to the join key), as Spark's reader returns it."""
    event_time, rest = split_timestamped(data, prefix=prefix, source=source)
    *fields, event_time_field = schema.fields
    return {**_row(rest, StructType(tuple(fields)), source), event_time_field.name: event_time}


def _row(encoded: bytes, schema: StructType, source: str) -> dict[str, Any]:
    if not schema.fields:
        return {}
    row = strip_encoding_version(encoded, source=source, what="state row")
    return decode_unsafe_row(row, schema, source=source)


def _range_key(data: bytes, schema: StructType, ordinals: list[int], source: str) -> dict[str, Any]:
    """The ordering fields from their big-endian binaries, then the others, in schema order."""
    first, rest = split_prefixed(data, source)
    ordered = fields_at(schema, ordinals)
    as_binary = StructType(tuple(StructField(f.name, AtomicType("binary")) for f in ordered.fields))
    binaries = decode_unsafe_row(
        strip_encoding_version(first, source=source, what="range key"), as_binary, source=source
    )
    values = {f.name: _ordered(binaries[f.name], f, source) for f in ordered.fields}
    if rest:
        values.update(_row(rest, fields_except(schema, ordinals), source))
    return in_schema_order(schema, values)


def _ordered(raw: bytes | None, field: StructField, source: str) -> Any:
    return ordered_value(raw[0], raw[1:], field, source) if raw else None
