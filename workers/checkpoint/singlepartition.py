"""Stateful operators that Spark runs on one partition, told from what the checkpoint holds.

An operator whose ``requiredChildDistribution`` is ``AllTuples`` runs as one task, so its state
has partition 0 only, whatever ``spark.sql.shuffle.partitions`` says (the operator metadata's
``numPartitions`` still says the configured number). In Spark's source (2.x to 4.x) these are:

* StreamingGlobalLimitExec (``limit`` on a stream): always ``AllTuples``. Operator metadata
  name ``globalLimit`` (Spark 4.0+); key schema ``struct<key:void>`` and value schema
  ``struct<value:bigint>``, fixed in the operator.
* StateStoreRestoreExec / StateStoreSaveExec without grouping keys (a global aggregation such
  as a streaming ``count()``): ``AllTuples`` when ``keyExpressions`` is empty; key schema
  ``struct<>``.

Every other stateful operator (deduplication, joins, [flat]mapGroupsWithState,
transformWithState, grouped aggregations, session windows, which refuse a global aggregation)
has keys and a ClusteredDistribution over every shuffle partition.
"""

from __future__ import annotations

from .sparktypes import AtomicType, StructField, StructType
from .stateschema import OperatorStateMetadata, StoreSchema

GLOBAL_LIMIT_OPERATOR_NAME = "globalLimit"  # StreamingGlobalLimitExec.shortName
GLOBAL_LIMIT_KEY_SCHEMA = StructType((StructField("key", AtomicType("void")),))
GLOBAL_LIMIT_VALUE_SCHEMA = StructType((StructField("value", AtomicType("long")),))


def runs_on_one_partition(metadata: OperatorStateMetadata | None, schema: StoreSchema | None) -> bool:
    """True when the operator metadata or the state schema names an ``AllTuples`` operator."""
    if metadata is not None and metadata.operator_info.operator_name == GLOBAL_LIMIT_OPERATOR_NAME:
        return True
    if schema is None:
        return False
    return not schema.key_schema.fields or _has_global_limit_schema(schema)


def _has_global_limit_schema(schema: StoreSchema) -> bool:
    # Compared without nullability: the limit's fields are nullable, but that is not what tells it.
    return _shape(schema.key_schema) == _shape(GLOBAL_LIMIT_KEY_SCHEMA) and _shape(schema.value_schema) == _shape(
        GLOBAL_LIMIT_VALUE_SCHEMA
    )


def _shape(struct: StructType) -> tuple[tuple[str, object], ...]:
    return tuple((field.name, field.data_type) for field in struct.fields)
