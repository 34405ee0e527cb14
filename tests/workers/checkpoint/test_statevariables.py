"""State variables of transformWithState stores (statevariables.py, rocksdbcfrows.py) on the
PySpark-written fixtures of tests/fixtures/tws, and on damaged copies of them.

Expectations come from the query itself (pipelines/tws_queries.py: 7 rows a batch, keys
value % 3, 4 batches, so 28 values over 3 keys), from the file names Spark wrote and from the
bytes of Spark's list framing stated as literals; the comparison with Spark's own reader is
tests/spark/test_state_variables_vs_spark.py.
"""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import CorruptFileError
from workers.checkpoint.logdir import list_batch_ids, read_commit
from workers.checkpoint.rocksdbcfrows import split_list_value
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.sparktypes import AtomicType, StructField, StructType
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.stateschema import StateStoreColFamilySchema
from workers.checkpoint.statevariableavro import decode_avro_value
from workers.checkpoint.statevariablerows import (
    UndecodedEncodingError,
    decode_unsafe_row_key,
    sample_state_variable_rows,
    undecoded_reason,
)
from workers.checkpoint.statevariables import (
    StateVariable,
    count_state_variables,
    describe_state_variables,
    list_schema_files,
    read_schema_history,
    read_state_variables,
    read_writer_schemas,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

TWS = OUR_FIXTURES / "tws"
LAST_VERSION = 4  # 4 batches committed (0-3): RocksDB version = batch + 1
ROWS_WRITTEN = 28  # 7 rate rows a batch


def _copy(tmp_path: Path, variant: str = "unsaferow") -> CheckpointStorage:
    shutil.copytree(TWS / variant / "checkpoint", tmp_path / variant)
    return CheckpointStorage(str(tmp_path / variant))


def _figures(storage: CheckpointStorage) -> dict[str, tuple[int, int]]:
    """name -> (rows, values) summed over the partitions at the last version."""
    variables = read_state_variables(storage, 0)
    totals: dict[str, tuple[int, int]] = {}
    commits = {batch: read_commit(storage, batch) for batch in list_batch_ids(storage, "commits")}
    for store in list_state_store_dirs(storage):
        unique_id = state_unique_ids_by_version(commits, operator=0, partition=store.partition).get(LAST_VERSION)
        for f in count_state_variables(storage, store, LAST_VERSION, variables, codec="lz4", unique_id=unique_id):
            rows, values = totals.get(f.name, (0, 0))
            totals[f.name] = (rows + f.rows, values + f.values)
    return totals


@pytest.mark.parametrize("variant", ["unsaferow", "avro_format2"])
def test_every_variable_is_counted_with_its_kind(tmp_path, variant):
    storage = _copy(tmp_path, variant)

    kinds = {v.name: (v.kind, v.internal) for v in read_state_variables(storage, 0)}
    totals = _figures(storage)

    assert kinds["count"] == ("ValueState", False) and kinds["recent"] == ("ListState", False)
    assert kinds["by_parity"] == ("MapState", False) and kinds["$ttl_last_seen"] == ("TTL index", True)
    assert kinds["$procTimers_keyToTimestamp"] == ("timers (processing time)", True)
    # 3 keys: one row each in count, recent, last_seen, the timers; both parities for each key.
    assert totals["count"] == totals["last_seen"] == totals["$procTimers_keyToTimestamp"] == (3, 3)
    assert totals["recent"] == (3, ROWS_WRITTEN)
    assert totals["by_parity"] == (6, 6)
    assert totals["default"] == (0, 0)


def test_decoded_lists_hold_every_value_the_query_appended(tmp_path):
    storage = _copy(tmp_path)
    recent = next(v for v in read_state_variables(storage, 0) if v.name == "recent")

    values = [
        element["value"]
        for store in list_state_store_dirs(storage)
        for row in sample_state_variable_rows(
            storage, store, LAST_VERSION, recent, limit=10, codec="lz4", encoding=None
        )
        for element in row.value
        if element["value"] % 3 == row.key["key"]
    ]

    assert sorted(values) == list(range(ROWS_WRITTEN))


def _decoded(storage: CheckpointStorage, name: str, encoding: str) -> list:
    variables = {v.name: v for v in read_state_variables(storage, 0)}
    writers = read_writer_schemas(storage, 0)
    commits = {batch: read_commit(storage, batch) for batch in list_batch_ids(storage, "commits")}
    return [
        row
        for store in list_state_store_dirs(storage)
        for row in sample_state_variable_rows(
            storage,
            store,
            LAST_VERSION,
            variables[name],
            limit=100,
            codec="lz4",
            encoding=encoding,
            writer_schemas=writers,
            unique_id=state_unique_ids_by_version(commits, operator=0, partition=store.partition).get(LAST_VERSION),
        )
    ]


def test_avro_rows_decode_to_what_the_query_wrote(tmp_path):
    storage = _copy(tmp_path, "avro_format2")

    counts = {row.key["key"]: row.value["count"] for row in _decoded(storage, "count", "avro")}
    lists = {row.key["key"]: [e["value"] for e in row.value] for row in _decoded(storage, "recent", "avro")}
    parities = {
        (row.key["key"], row.user_key["parity"]): row.value["rows"] for row in _decoded(storage, "by_parity", "avro")
    }
    timers = _decoded(storage, "$procTimers_keyToTimestamp", "avro")

    # 28 values 0..27, key = value % 3: key 0 has 10 values, keys 1 and 2 have 9.
    assert counts == {0: 10, 1: 9, 2: 9}
    assert {key: sorted(values) for key, values in lists.items()} == {k: list(range(k, 28, 3)) for k in range(3)}
    assert parities == {
        (k, parity): sum(1 for v in range(k, 28, 3) if (v % 2 == 0) == (parity == "even"))
        for k in range(3)
        for parity in ("even", "odd")
    }
    assert sorted(row.key["key"]["key"] for row in timers) == [0, 1, 2]


def test_avro_and_unsaferow_fixtures_decode_alike(tmp_path):
    """The same query wrote both: apart from times, every decoded row is the same."""
    avro, unsafe = _copy(tmp_path, "avro_format2"), _copy(tmp_path, "unsaferow")
    for name in ("count", "recent", "by_parity", "$rowCounter_recent"):
        assert [(r.key, r.user_key, r.value) for r in _decoded(avro, name, "avro")] == [
            (r.key, r.user_key, r.value) for r in _decoded(unsafe, name, "unsaferow")
        ], name
    ttl_keys = [sorted(r.key) for r in _decoded(avro, "$ttl_last_seen", "avro")]
    assert ttl_keys == [["elementKey", "expirationMs"]] * 3


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x00\x00\x00\x02", "the bytes end inside a number"),  # union branch 1, then no long
        (b"\x00\x00\x00\x04\x12", "union branch 2"),
        (b"\x00\x00\x00\x02\x12\x00", "1 bytes left after the record"),
        (b"\x00\x07\x00\x02\x12", "value schema id 7 of 'count' is in no state schema file"),
        (b"\x01\x00\x00\x02\x12", "encoding version 1"),
    ],
)
def test_bad_avro_bytes_are_an_error_naming_the_file_and_field(tmp_path, value, reason):
    storage = _copy(tmp_path, "avro_format2")
    count = next(v for v in read_state_variables(storage, 0) if v.name == "count")

    with pytest.raises(CorruptFileError, match=re.escape(reason)) as caught:
        decode_avro_value(value, count, read_writer_schemas(storage, 0), source="state/0/1/4.changelog")

    assert caught.value.path == "state/0/1/4.changelog"
    if "union" in reason or "number" in reason:
        assert "field 'count'" in str(caught.value)


def test_an_encoding_neither_unsaferow_nor_avro_is_counted_not_decoded(tmp_path):
    storage = _copy(tmp_path, "avro_format2")
    count = next(v for v in read_state_variables(storage, 0) if v.name == "count")
    store = list_state_store_dirs(storage)[0]

    with pytest.raises(UndecodedEncodingError, match="protobuf-encoded"):
        sample_state_variable_rows(storage, store, LAST_VERSION, count, limit=1, codec="lz4", encoding="protobuf")


def test_a_truncated_changelog_is_an_error_naming_it(tmp_path):
    storage = _copy(tmp_path)
    changelog = tmp_path / "unsaferow" / "state" / "0" / "1" / f"{LAST_VERSION}.changelog"
    changelog.write_bytes(changelog.read_bytes()[:-9])

    with pytest.raises(CorruptFileError) as caught:
        _figures(storage)

    assert caught.value.path == f"state/0/1/{LAST_VERSION}.changelog"


def test_a_damaged_schema_file_is_an_error_naming_it(tmp_path):
    storage = _copy(tmp_path)
    ((_, relpath),) = list_schema_files(storage, 0, "default")
    path = tmp_path / "unsaferow" / relpath
    path.write_bytes(path.read_bytes()[:40])

    with pytest.raises(CorruptFileError) as caught:
        read_state_variables(storage, 0)

    assert caught.value.path == relpath


def test_the_schema_history_lists_each_file_with_what_it_changed(tmp_path):
    storage = _copy(tmp_path)
    ((batch_id, relpath),) = list_schema_files(storage, 0, "default")
    later = tmp_path / "unsaferow" / relpath.replace(f"/{batch_id}_", "/3_")
    shutil.copyfile(tmp_path / "unsaferow" / relpath, later)

    history = read_schema_history(storage, 0)

    assert [(change.batch_id, change.changed, change.removed) for change in history] == [(0, (), ()), (3, (), ())]
    assert "count" in history[0].added and history[1].added == ()


def _element(row: bytes) -> bytes:
    return struct.pack("<i", len(row)) + row


def test_list_elements_are_split_at_merge_delimiters_only():
    # A 44-byte element's size starts with the delimiter's byte (0x2c): it is not a delimiter.
    first, long_one, last = b"\x00" + b"\x01" * 16, b"\x00" + b"\x02" * 43, b"\x00" + b"\x03" * 8
    value = _element(first) + _element(long_one) + b"," + _element(last)

    assert split_list_value(value, source="x") == [first, long_one, last]
    with pytest.raises(CorruptFileError):
        split_list_value(value[:-1], source="x")


def _families(*names: str) -> list[StateStoreColFamilySchema]:
    empty = StructType(())
    return [StateStoreColFamilySchema(name, empty, empty) for name in names]


def test_the_families_of_a_join_are_named_by_what_spark_keeps_in_them():
    # SymmetricHashJoinStateManager's store names; a join's operator metadata lists no variables.
    format3 = describe_state_variables(
        _families("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "default"),
        {"useVirtualColumnFamilies": True},
    )
    format4 = describe_state_variables(_families("left-keyWithTsToValues", "left-tsWithKey"), {})

    assert [(v.name, v.kind, v.internal, v.serves) for v in format3] == [
        ("left-keyWithIndexToValue", "join input rows", False, "left"),
        ("default", "default", True, None),
        ("left-keyToNumValues", "join key counts", True, "left"),
        ("right-keyToNumValues", "join key counts", True, "right"),
    ]
    assert [(v.kind, v.internal) for v in format4] == [
        ("join input rows by event time", False),
        ("join event-time index", True),
    ]


def test_a_processor_variable_named_like_a_join_family_stays_a_variable():
    (variable,) = describe_state_variables(
        _families("left-keyToNumValues"),
        {"stateVariables": [{"stateName": "left-keyToNumValues", "stateVariableType": "ValueState"}]},
    )
    assert (variable.kind, variable.internal) == ("ValueState", False)


# Keys of join state format 4 (family id removed) as Spark 4.3 wrote them for a stream-stream
# join on a long key (tests/spark/test_join_column_families_vs_spark.py runs one), and the key
# Spark's statestore reader returned for each: Row(field0=2, __event_time=1704067213000000).
_SPARK_TS_POSTFIX_KEY = bytes.fromhex("000000000000000000020000000000000080060dd710e77d40")
_SPARK_TS_PREFIX_KEY = bytes.fromhex("80060dd710e77d400000000000000000000200000000000000")


@pytest.mark.parametrize(
    ("encoder", "key"),
    [
        ("TimestampAsPostfixKeyStateEncoderSpec", _SPARK_TS_POSTFIX_KEY),
        ("TimestampAsPrefixKeyStateEncoderSpec", _SPARK_TS_PREFIX_KEY),
    ],
)
def test_join_format4_keys_decode_to_sparks_key_and_event_time(encoder, key):
    variable = _timestamp_keyed("left-keyWithTsToValues", encoder)
    assert undecoded_reason(variable) is None
    assert decode_unsafe_row_key(key, variable, source="k") == {"field0": 2, "__event_time": 1704067213000000}


def test_an_event_time_before_1970_keeps_its_sign():
    # The sign bit is flipped so that byte order is time order: -1 is 0x7fff...ff.
    key = bytes.fromhex("7fffffffffffffff") + _SPARK_TS_PREFIX_KEY[8:]
    variable = _timestamp_keyed("left-tsWithKey", "TimestampAsPrefixKeyStateEncoderSpec")
    assert decode_unsafe_row_key(key, variable, source="k")["__event_time"] == -1


def test_a_timestamp_key_too_short_for_its_event_time_is_an_error_naming_the_file():
    variable = _timestamp_keyed("left-tsWithKey", "TimestampAsPrefixKeyStateEncoderSpec")
    with pytest.raises(CorruptFileError, match="1.changelog.*no event time"):
        decode_unsafe_row_key(b"\x80\x06", variable, source="state/0/0/1.changelog")


def test_avro_timestamp_keys_are_counted_not_decoded():
    variable = _timestamp_keyed("left-tsWithKey", "TimestampAsPrefixKeyStateEncoderSpec")
    assert "counted, not decoded" in undecoded_reason(variable, "avro")


def _timestamp_keyed(name: str, encoder: str) -> StateVariable:
    key_schema = StructType(
        (StructField("field0", AtomicType("long")), StructField("__event_time", AtomicType("long"), nullable=False))
    )
    schema = StateStoreColFamilySchema(
        name, key_schema, StructType(()), key_state_encoder_spec={"keyStateEncoderType": encoder}
    )
    return StateVariable(name, "join event-time index", True, schema=schema)
