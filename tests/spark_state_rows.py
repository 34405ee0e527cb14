"""Rows of Spark's ``statestore`` source and our decoded rows, brought to one comparable form.

Both sides become sorted lists of (repr(key), repr(value)) with plain tuples, lists and dicts,
so a test can compare a partition's whole state with ``==``.
"""

from __future__ import annotations

import datetime

from pyspark.sql import functions as F
from pyspark.sql import types as T

from workers.checkpoint import sparktypes as ours

UTC = datetime.UTC


def from_spark(value, data_type: T.DataType):
    """Normalise a collected value; PySpark gives timestamps as naive local times."""
    if value is None:
        return None
    if isinstance(data_type, T.StructType):
        return tuple(from_spark(v, f.dataType) for v, f in zip(value, data_type.fields, strict=False))
    if isinstance(data_type, T.ArrayType):
        return [from_spark(v, data_type.elementType) for v in value]
    if isinstance(data_type, T.MapType):
        return {from_spark(k, data_type.keyType): from_spark(v, data_type.valueType) for k, v in value.items()}
    if isinstance(data_type, T.TimestampType):
        return value.astimezone(UTC)
    return bytes(value) if isinstance(value, bytearray) else value


def from_ours(value, data_type: ours.DataType):
    if value is None:
        return None
    if isinstance(data_type, ours.StructType):
        return tuple(from_ours(v, f.data_type) for v, f in zip(value.values(), data_type.fields, strict=False))
    if isinstance(data_type, ours.ArrayType):
        return [from_ours(v, data_type.element_type) for v in value]
    if isinstance(data_type, ours.MapType):
        return {from_ours(k, data_type.key_type): from_ours(v, data_type.value_type) for k, v in value}
    return value


def spark_rows(frame, partition: int) -> list:
    """The rows of one partition of a ``statestore`` frame, comparable."""
    key_type, value_type = frame.schema["key"].dataType, frame.schema["value"].dataType
    rows = frame.where(F.col("partition_id") == partition).select("key", "value").collect()
    return sorted((repr(from_spark(r.key, key_type)), repr(from_spark(r.value, value_type))) for r in rows)


def comparable_rows(rows, schema) -> list:
    """Our DecodedStateRows of one store (``schema``: its StateStoreSchema), comparable."""
    return sorted(
        (repr(from_ours(r.key, schema.key_schema)), repr(from_ours(r.value, schema.value_schema))) for r in rows
    )
