"""The state variables of a transformWithState operator: what each is, its schema and its rows.

A transformWithState store (RocksDB, column families) holds one column family per state
variable plus Spark's own families, named (TransformWithStateVariableUtils, TimerStateImpl,
ListStateMetricsImpl, the *StateImplWithTTL classes)::

    <name>                          a ValueState, ListState or MapState of the processor
    $procTimers_keyToTimestamp      registered timers, processing time (what Spark's reader
    $eventTimers_keyToTimestamp     returns with readRegisteredTimers); event time
    $procTimers_timestampToKey      the same timers ordered by expiry (an index)
    $eventTimers_timestampToKey
    $ttl_<name>                     expiry index of a variable with a TTL
    $min_<name>, $count_<name>      minimum expiry and element count of a ListState with a TTL
    $rowCounter_<name>              element count of a ListState (for the query's metrics)
    default                         created for every store, empty under transformWithState

A stream-stream join with ``spark.sql.streaming.join.stateFormatVersion`` 3 (Spark 4.x; the
default stays 2: four stores without column families) keeps its four stores as families of one
``default`` store (SymmetricHashJoinStateManager): ``<side>-keyWithIndexToValue`` holds the
input rows a later row may join with (what Spark's numRowsTotal counts), ``<side>-keyToNumValues``
how many each key has. Format 4 keeps ``<side>-keyWithTsToValues`` (the rows as lists per key
and event time) and ``<side>-tsWithKey`` (an event-time index, its value a one-element list)
instead, keyed by Timestamp*KeyStateEncoderSpec (statekeylayout). Its operator metadata lists no state
variables; they are described here as join families.

Where they are described: the newest state schema v3 file (``state/<op>/_stateSchema/<store>/
<batch>_<uuid>``) lists every family with its key and value schemas and key encoder; the
operator metadata v2 (``state/<op>/_metadata/v2/<batch>``) lists the processor's variables with
their kind (``stateVariableType``) and whether they have a TTL. Each batch that changes a
schema (a variable added, a schema evolved) writes a new schema file: their sequence is the
schema history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .layout import parse_batch_id
from .rocksdbcfrows import ColumnFamilyFigures, count_column_family_rows
from .sparktypes import StructType, simple_string
from .stateinventory import DEFAULT_STORE_NAME, StateStoreDir
from .stateschema import (
    DEFAULT_COL_FAMILY_NAME,
    StateStoreColFamilySchema,
    find_operator_state_metadata,
    parse_state_schema_file,
)

if TYPE_CHECKING:
    from .storage.checkpointstorage import CheckpointStorage

USER_KINDS = ("ValueState", "ListState", "MapState")
# Spark's internal families: name -> kind; prefixes: prefix -> kind of the family serving <name>.
_TIMER_FAMILIES = {
    "$procTimers_keyToTimestamp": "timers (processing time)",
    "$eventTimers_keyToTimestamp": "timers (event time)",
    "$procTimers_timestampToKey": "timer index (processing time)",
    "$eventTimers_timestampToKey": "timer index (event time)",
}
# Families of a join (SymmetricHashJoinStateManager's store names): suffix -> (kind, internal).
JOIN_ROWS_BY_EVENT_TIME = "join input rows by event time"
JOIN_EVENT_TIME_INDEX = "join event-time index"
_JOIN_FAMILIES = {
    "-keyWithIndexToValue": ("join input rows", False),
    "-keyToNumValues": ("join key counts", True),
    "-keyWithTsToValues": (JOIN_ROWS_BY_EVENT_TIME, False),
    "-tsWithKey": (JOIN_EVENT_TIME_INDEX, True),
}
# Kinds whose values are lists of rows (Spark's useMultipleValuesPerKey).
LIST_KINDS = frozenset({"ListState", JOIN_ROWS_BY_EVENT_TIME, JOIN_EVENT_TIME_INDEX})
_JOIN_SIDES = ("left", "right")
_INTERNAL_PREFIXES = {
    "$ttl_": "TTL index",
    "$min_": "TTL minimum expiry",
    "$count_": "TTL element count",
    "$rowCounter_": "list length",
}


@dataclass(frozen=True, slots=True)
class StateVariable:
    """One column family of a transformWithState store, as the page shows it.

    ``kind`` is a user kind (USER_KINDS), a timer or TTL kind (see the module), ``default`` or
    ``internal``; ``serves`` names the variable an internal family belongs to.
    """

    name: str
    kind: str
    internal: bool
    ttl_enabled: bool = False
    serves: str | None = None
    schema: StateStoreColFamilySchema | None = None

    @property
    def is_timers(self) -> bool:
        return self.name in _TIMER_FAMILIES and "keyToTimestamp" in self.name


@dataclass(frozen=True, slots=True)
class StateVariableFigures:
    """A variable's rows (RocksDB keys), values (list elements for a ListState) and bytes; its
    key and value schemas (Spark's simpleString) and the batches whose schema file added it or
    changed its schema (with_schema_history), oldest first."""

    name: str
    kind: str
    internal: bool
    rows: int
    values: int
    bytes: int
    key_schema: str = ""
    value_schema: str = ""
    schema_batches: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One state schema file: the batch that wrote it and what changed since the previous one."""

    batch_id: int
    path: str
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]


def describe_state_variables(
    families: Sequence[StateStoreColFamilySchema], operator_properties: dict[str, Any] | None
) -> tuple[StateVariable, ...]:
    """The variables of a store from its schema file's families and the operator's properties.

    User variables first (in the order the processor declared them when the metadata says),
    then Spark's own families.
    """
    declared = _declared_variables(operator_properties)
    names = {family.col_family_name for family in families}
    is_join = "stateVariables" not in (operator_properties or {})
    variables = [(is_join and _join_family(family)) or _describe(family, declared, names) for family in families]
    order = {name: index for index, name in enumerate(declared)}
    return tuple(sorted(variables, key=lambda v: (v.internal, order.get(v.name, len(order)), v.name)))


def _declared_variables(operator_properties: dict[str, Any] | None) -> dict[str, tuple[str, bool]]:
    """name -> (stateVariableType, ttlEnabled) from operatorPropertiesJson's stateVariables."""
    entries = (operator_properties or {}).get("stateVariables")
    if not isinstance(entries, list):
        return {}
    return {
        entry["stateName"]: (str(entry.get("stateVariableType")), entry.get("ttlEnabled") is True)
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("stateName"), str)
    }


def _join_family(family: StateStoreColFamilySchema) -> StateVariable | None:
    side, _, rest = family.col_family_name.partition("-")
    found = _JOIN_FAMILIES.get(f"-{rest}") if side in _JOIN_SIDES else None
    if found is None:
        return None
    kind, internal = found
    return StateVariable(family.col_family_name, kind, internal=internal, serves=side, schema=family)


def _describe(
    family: StateStoreColFamilySchema, declared: dict[str, tuple[str, bool]], names: set[str]
) -> StateVariable:
    name = family.col_family_name
    if name == DEFAULT_COL_FAMILY_NAME:
        return StateVariable(name, "default", internal=True, schema=family)
    if name in _TIMER_FAMILIES:
        return StateVariable(name, _TIMER_FAMILIES[name], internal=True, schema=family)
    for prefix, kind in _INTERNAL_PREFIXES.items():
        if name.startswith(prefix):
            return StateVariable(name, kind, internal=True, serves=name[len(prefix) :], schema=family)
    if name.startswith("$"):
        return StateVariable(name, "internal", internal=True, schema=family)
    kind, ttl_enabled = declared.get(name, (_kind_from_schemas(family, names), f"$ttl_{name}" in names))
    return StateVariable(name, kind, internal=False, ttl_enabled=ttl_enabled, schema=family)


def _kind_from_schemas(family: StateStoreColFamilySchema, names: set[str]) -> str:
    """Without operator metadata: a user key schema means a map, a row counter a list."""
    name = family.col_family_name
    if family.user_key_encoder_schema is not None:
        return "MapState"
    if f"$rowCounter_{name}" in names or f"$count_{name}" in names:
        return "ListState"
    return "ValueState"


def read_state_variables(
    storage: CheckpointStorage, operator_id: int, store_name: str = DEFAULT_STORE_NAME
) -> tuple[StateVariable, ...]:
    """The variables of one store from its newest schema v3 file and the operator metadata.

    Returns () when the operator has no schema v3 file (not a store with column families).
    Raises CorruptFileError naming a damaged schema or metadata file.
    """
    paths = list_schema_files(storage, operator_id, store_name)
    if not paths:
        return ()
    path = paths[-1][1]
    schema_file = parse_state_schema_file(storage.read_bytes(path), source=path)
    metadata = find_operator_state_metadata(storage, operator_id)
    return describe_state_variables(schema_file.col_families, metadata and metadata.operator_properties)


def list_schema_files(storage: CheckpointStorage, operator_id: int, store_name: str) -> list[tuple[int, str]]:
    """(batch id, path) of every ``<batch>_<uuid>`` schema file of a store, by batch."""
    directory = f"state/{operator_id}/_stateSchema/{store_name}"
    found = []
    for info in storage.list_dir(directory):
        batch_id = parse_batch_id(info.name.partition("_")[0])
        if not info.is_dir and batch_id is not None and "_" in info.name and not info.name.endswith(".crc"):
            found.append((batch_id, f"{directory}/{info.name}"))
    return sorted(found)


def read_schema_history(
    storage: CheckpointStorage, operator_id: int, store_name: str = DEFAULT_STORE_NAME
) -> tuple[SchemaChange, ...]:
    """Every schema file of a store, oldest first, with the families it added, changed, removed.

    A family changed when its key or value schema (or their ids) differ from the previous file.
    Raises CorruptFileError naming a damaged schema file.
    """
    history: list[SchemaChange] = []
    before: dict[str, StateStoreColFamilySchema] = {}
    for batch_id, path in list_schema_files(storage, operator_id, store_name):
        families = {
            f.col_family_name: f for f in parse_state_schema_file(storage.read_bytes(path), source=path).col_families
        }
        history.append(
            SchemaChange(
                batch_id,
                path,
                added=tuple(sorted(families.keys() - before.keys())),
                changed=tuple(
                    sorted(
                        n for n in families.keys() & before.keys() if _schema_of(families[n]) != _schema_of(before[n])
                    )
                ),
                removed=tuple(sorted(before.keys() - families.keys())),
            )
        )
        before = families
    return tuple(history)


def read_writer_schemas(
    storage: CheckpointStorage, operator_id: int, store_name: str = DEFAULT_STORE_NAME
) -> dict[tuple[str, bool, int], StructType]:
    """(family, is key, schema id) -> schema, from every schema file of a store (oldest first).

    Avro rows name the schema they were written with by its id (statevariableavro.py); a row
    of a batch before its family's schema evolved names an older file's id. Raises
    CorruptFileError naming a damaged schema file.
    """
    schemas: dict[tuple[str, bool, int], StructType] = {}
    for _, path in list_schema_files(storage, operator_id, store_name):
        for family in parse_state_schema_file(storage.read_bytes(path), source=path).col_families:
            schemas[(family.col_family_name, True, family.key_schema_id)] = family.key_schema
            schemas[(family.col_family_name, False, family.value_schema_id)] = family.value_schema
    return schemas


def _schema_of(family: StateStoreColFamilySchema) -> tuple:
    return (family.key_schema, family.value_schema, family.key_schema_id, family.value_schema_id)


def count_state_variables(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    variables: Sequence[StateVariable],
    *,
    codec: str | None,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
) -> tuple[StateVariableFigures, ...]:
    """Rows, values and bytes of each variable of ``store`` at ``version``, in ``variables``' order.

    Families ``variables`` does not name come last (figures_with_families). Raises as
    rocksdbcfrows.open_column_family_rows.
    """
    lists = list_family_names(variables)
    families = count_column_family_rows(
        storage, store, version, codec=codec, unique_id=unique_id, max_read_bytes=max_read_bytes, list_families=lists
    )
    return figures_with_families(blank_figures(variables), families)


def list_family_names(variables: Sequence[StateVariable | StateVariableFigures]) -> frozenset[str]:
    """The names of the families whose values are lists (their values are the list elements)."""
    return frozenset(v.name for v in variables if v.kind in LIST_KINDS)


def blank_figures(variables: Sequence[StateVariable]) -> tuple[StateVariableFigures, ...]:
    """Each variable with no rows yet, and its schemas."""
    return tuple(StateVariableFigures(v.name, v.kind, v.internal, 0, 0, 0, *_schema_texts(v)) for v in variables)


def figures_with_families(
    described: Sequence[StateVariableFigures], families: Sequence[ColumnFamilyFigures]
) -> tuple[StateVariableFigures, ...]:
    """``described`` with each family's rows, values and bytes, in their order (0 for a variable
    without a family). A family ``described`` does not name (``default``, which no schema file
    lists, or one of a schema file not read yet) comes last, of kind ``default``, ``internal``
    when Spark marks it so, else ``unknown``."""
    by_name = {f.name: f for f in families}
    known = [replace(f, **_numbers(by_name.pop(f.name, None))) for f in described]
    others = [
        StateVariableFigures(f.name, kind, kind != "unknown", f.rows, f.values, f.bytes)
        for f in by_name.values()
        for kind in [_unlisted_kind(f.name, f.internal)]
    ]
    return tuple(known + others)


def user_rows(figures: Sequence[StateVariableFigures]) -> int:
    """The rows of the store's own variables, not Spark's families (Spark's numKeys)."""
    return sum(f.rows for f in figures if not f.internal)


def describe_store_variables(
    storage: CheckpointStorage, operator_id: int, store_name: str
) -> tuple[StateVariableFigures, ...]:
    """The variables of a store with their schemas and schema history, no rows counted yet; ()
    for a store without schema v3 files (no column families).

    Raises CorruptFileError naming a damaged schema or metadata file.
    """
    variables = read_state_variables(storage, operator_id, store_name)
    if not variables:
        return ()
    return with_schema_history(blank_figures(variables), read_schema_history(storage, operator_id, store_name))


def _schema_texts(variable: StateVariable) -> tuple[str, str]:
    if variable.schema is None:
        return "", ""
    return simple_string(variable.schema.key_schema), simple_string(variable.schema.value_schema)


def with_schema_history(
    figures: Sequence[StateVariableFigures], history: Sequence[SchemaChange]
) -> tuple[StateVariableFigures, ...]:
    """Each variable's figures with the batches whose schema file added it or changed its schema."""
    batches: dict[str, list[int]] = {}
    for change in history:
        for name in (*change.added, *change.changed):
            batches.setdefault(name, []).append(change.batch_id)
    return tuple(replace(f, schema_batches=tuple(batches.get(f.name, ()))) for f in figures)


def _unlisted_kind(name: str, internal: bool) -> str:
    if name == DEFAULT_COL_FAMILY_NAME:
        return "default"
    return "internal" if internal else "unknown"


def _numbers(figures: ColumnFamilyFigures | None) -> dict[str, int]:
    if figures is None:
        return {"rows": 0, "values": 0, "bytes": 0}
    return {"rows": figures.rows, "values": figures.values, "bytes": figures.bytes}
