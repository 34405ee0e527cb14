"""State schema files and operator metadata, read from the checkpoints PySpark and Spark wrote.

Real files cover schema v2 (PySpark 4.3.0 fixtures, Spark 3.2.0's test checkpoint) and operator
metadata v1 (PySpark 4.3.0). Schema v1 and v3 and operator metadata v2 are written by Spark's
own writers in tests/spark/test_state_keys_vs_spark.py: no fixture here holds such a file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.errors import CheckpointError, CorruptFileError, TruncatedFileError, UnsupportedVersionError
from workers.checkpoint.sparktypes import simple_string
from workers.checkpoint.stateschema import (
    decode_modified_utf8,
    find_operator_state_metadata,
    find_store_schema,
    parse_operator_state_metadata,
    parse_state_schema_file,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

WINDOW_AGG = ("struct<window:struct<start:timestamp,end:timestamp>,key:string>", "struct<count:bigint>")
DEDUP = ("struct<id:string,event_time:timestamp>", "struct<__dummy__:void>")
KEY_TO_NUM_VALUES = ("struct<field0:bigint>", "struct<value:bigint>")


def _key_with_index(side: str) -> tuple[str, str]:
    return (
        "struct<field0:bigint,index:bigint>",
        f"struct<{side}_id:bigint,{side}_key:bigint,{side}_time:timestamp,matched:boolean>",
    )


# Every v2 schema file among the fixtures -> (key schema, value schema), from the queries in
# pipelines/queries.py and Spark's test suite (3.2.0: key1, key2 -> value).
EXPECTED_SCHEMAS = {
    "windowed_agg_file_sink/checkpoint/state/0/0/_metadata/schema": WINDOW_AGG,
    "killed_mid_batch/checkpoint/state/0/0/_metadata/schema": WINDOW_AGG,
    "hdfs_zstd_row_checksum/checkpoint/state/0/0/_metadata/schema": WINDOW_AGG,
    "rocksdb_changelog_agg/checkpoint/state/0/0/_metadata/schema": WINDOW_AGG,
    "file_source_dedup/checkpoint/state/0/0/_metadata/schema": DEDUP,
    "rocksdb_checkpoint_v2_dedup/checkpoint/state/0/0/_metadata/schema": DEDUP,
    "stream_stream_join/checkpoint/state/0/0/left-keyToNumValues/_metadata/schema": KEY_TO_NUM_VALUES,
    "stream_stream_join/checkpoint/state/0/0/right-keyToNumValues/_metadata/schema": KEY_TO_NUM_VALUES,
    "stream_stream_join/checkpoint/state/0/0/left-keyWithIndexToValue/_metadata/schema": _key_with_index("left"),
    "stream_stream_join/checkpoint/state/0/0/right-keyWithIndexToValue/_metadata/schema": _key_with_index("right"),
    "rocksdb_no_changelog_agg/checkpoint/state/0/0/_metadata/schema": WINDOW_AGG,
    **{
        f"rocksdb_stream_join/checkpoint/state/0/0/{side}-keyToNumValues/_metadata/schema": KEY_TO_NUM_VALUES
        for side in ("left", "right")
    },
    **{
        f"rocksdb_stream_join/checkpoint/state/0/0/{side}-keyWithIndexToValue/_metadata/schema": _key_with_index(side)
        for side in ("left", "right")
    },
    # StreamingGlobalLimitExec: one key of NullType ("key") and the count of rows let through ("value", LongType).
    "rocksdb_limit_checkpoint_v2/checkpoint/state/0/0/_metadata/schema": ("struct<key:void>", "struct<value:bigint>"),
    "checkpoint-version-3.2.0-deduplication-with-repartition/state/0/0/_metadata/schema": (
        "struct<key1:int,key2:int>",
        "struct<key1:int,key2:int,value:int>",
    ),
}
OPERATOR_METADATA_FILES = {
    "windowed_agg_file_sink": "stateStoreSave",
    "killed_mid_batch": "stateStoreSave",
    "hdfs_zstd_row_checksum": "stateStoreSave",
    "rocksdb_changelog_agg": "stateStoreSave",
    "file_source_dedup": "dedupe",
    "rocksdb_checkpoint_v2_dedup": "dedupe",
    "stream_stream_join": "symmetricHashJoin",
}
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue")


def _fixture_file(relpath: str) -> Path:
    ours = OUR_FIXTURES / relpath
    return ours if ours.exists() else SPARK_TEST_RESOURCES / relpath


def _schema_file_bytes() -> list[tuple[str, bytes]]:
    return [(relpath, _fixture_file(relpath).read_bytes()) for relpath in EXPECTED_SCHEMAS]


def test_the_expected_table_lists_every_schema_file_among_the_fixtures():
    on_disk = {str(p.relative_to(OUR_FIXTURES)) for p in OUR_FIXTURES.glob("*/checkpoint/state/**/_metadata/schema")}
    on_disk |= {str(p.relative_to(SPARK_TEST_RESOURCES)) for p in SPARK_TEST_RESOURCES.glob("*/state/**/schema")}

    assert on_disk == set(EXPECTED_SCHEMAS)


@pytest.mark.parametrize("relpath", sorted(EXPECTED_SCHEMAS))
def test_v2_schema_file_gives_the_key_and_value_schema_of_the_query(relpath):
    schema_file = parse_state_schema_file(_fixture_file(relpath).read_bytes(), source=relpath)

    (family,) = schema_file.col_families
    assert schema_file.version == 2
    assert family.col_family_name == "default"
    assert (simple_string(family.key_schema), simple_string(family.value_schema)) == EXPECTED_SCHEMAS[relpath]
    assert (family.key_schema_id, family.value_schema_id, family.key_state_encoder_spec) == (0, 0, None)


def test_window_key_keeps_the_watermark_metadata_spark_wrote():
    relpath = "windowed_agg_file_sink/checkpoint/state/0/0/_metadata/schema"
    family = parse_state_schema_file(_fixture_file(relpath).read_bytes(), source=relpath).col_families[0]

    assert family.key_schema.fields[0].metadata == {"spark.timeWindow": True, "spark.watermarkDelayMs": 2000}
    assert family.key_schema.fields[0].nullable is True


@pytest.mark.parametrize(("relpath", "data"), _schema_file_bytes(), ids=sorted(EXPECTED_SCHEMAS))
def test_every_truncation_of_a_schema_file_is_reported_as_truncated(relpath, data):
    for size in range(len(data)):
        with pytest.raises(TruncatedFileError) as caught:
            parse_state_schema_file(data[:size], source=relpath)
        assert str(caught.value).startswith(f"{relpath}: ")


@pytest.mark.parametrize(("relpath", "data"), _schema_file_bytes(), ids=sorted(EXPECTED_SCHEMAS))
def test_a_flipped_byte_anywhere_gives_a_schema_or_a_checkpoint_error(relpath, data):
    for position in range(len(data)):
        damaged = data[:position] + bytes([data[position] ^ 0xA5]) + data[position + 1 :]
        try:
            parse_state_schema_file(damaged, source=relpath)
        except CheckpointError as error:
            assert str(error).startswith(f"{relpath}: ")


def _windowed_schema_bytes() -> bytes:
    return (OUR_FIXTURES / "windowed_agg_file_sink/checkpoint/state/0/0/_metadata/schema").read_bytes()


def test_a_schema_version_above_v3_is_unsupported():
    data = _windowed_schema_bytes().replace(b"\x00\x02v2", b"\x00\x02v4", 1)

    with pytest.raises(UnsupportedVersionError, match="v4 is newer than the supported v3"):
        parse_state_schema_file(data, source="state/0/0/_metadata/schema")


def test_a_schema_file_without_a_version_string_is_corrupt():
    data = _windowed_schema_bytes().replace(b"\x00\x02v2", b"\x00\x02x2", 1)

    with pytest.raises(CorruptFileError, match="expected a version like 'v2', found 'x2'"):
        parse_state_schema_file(data, source="state/0/0/_metadata/schema")


def test_an_absurd_chunk_count_is_refused_before_reading_on():
    data = bytearray(_windowed_schema_bytes())
    data[4:8] = (2**31 - 1).to_bytes(4, "big")  # the key schema's chunk count

    with pytest.raises(CorruptFileError) as caught:
        parse_state_schema_file(bytes(data), source="state/0/0/_metadata/schema")
    assert "2147483647 announced" in str(caught.value)
    assert caught.value.offset == 4


def test_modified_utf8_reads_javas_two_byte_nul_and_surrogate_pairs():
    # "a", NUL as C0 80, "é", then U+1F600 as the two 3-byte surrogates DataOutputStream writes.
    raw = b"a\xc0\x80\xc3\xa9\xed\xa0\xbd\xed\xb8\x80"

    text = decode_modified_utf8(raw, source="s")

    assert text == "a\x00é\ud83d\ude00"  # pairs are joined by the caller, after all chunks


def test_modified_utf8_refuses_a_four_byte_sequence_and_a_stray_continuation_byte():
    with pytest.raises(CorruptFileError, match="4-byte sequence"):
        decode_modified_utf8("😀".encode(), source="s")
    with pytest.raises(CorruptFileError) as caught:
        decode_modified_utf8(b"ab\x80", source="s", offset=100)
    assert caught.value.offset == 102


@pytest.mark.parametrize(("fixture", "operator_name"), sorted(OPERATOR_METADATA_FILES.items()))
def test_operator_metadata_v1_names_the_operator_and_its_stores(fixture, operator_name):
    relpath = "state/0/_metadata/metadata"
    data = (OUR_FIXTURES / fixture / "checkpoint" / relpath).read_bytes()

    metadata = parse_operator_state_metadata(data, source=relpath)

    assert (metadata.version, metadata.operator_info.operator_id) == (1, 0)
    assert metadata.operator_info.operator_name == operator_name
    assert metadata.store_names == (JOIN_STORES if fixture == "stream_stream_join" else ("default",))
    assert {
        (s.num_partitions, s.num_cols_prefix_key, s.state_schema_file_paths) for s in metadata.state_store_info
    } == {(2, 0, ())}
    assert metadata.operator_properties is None


def test_every_truncation_of_operator_metadata_is_a_checkpoint_error():
    relpath = "state/0/_metadata/metadata"
    data = (OUR_FIXTURES / "stream_stream_join" / "checkpoint" / relpath).read_bytes()

    for size in range(len(data)):
        with pytest.raises(CheckpointError) as caught:
            parse_operator_state_metadata(data[:size], source=relpath)
        assert str(caught.value).startswith(f"{relpath}: ")


@pytest.mark.parametrize(
    ("old", "new", "error", "reason"),
    [
        (b"v1\n", b"v3\n", UnsupportedVersionError, "v3 is newer than the supported v2"),
        (b'"operatorName":"dedupe"', b'"operatorName":7', CorruptFileError, "'operatorName' must be a string"),
        (b'"numPartitions":2', b'"numPartitionz":2', CorruptFileError, "missing field 'numPartitions'"),
        (b'"stateStoreInfo":[', b'"stateStoreInfo":{"a":[', CorruptFileError, "invalid JSON"),
    ],
)
def test_damaged_operator_metadata_says_what_is_wrong(old, new, error, reason):
    relpath = "state/0/_metadata/metadata"
    data = (OUR_FIXTURES / "file_source_dedup" / "checkpoint" / relpath).read_bytes()

    with pytest.raises(error) as caught:
        parse_operator_state_metadata(data.replace(old, new), source=relpath)
    assert reason in str(caught.value)


def test_find_functions_read_the_join_operator_and_each_of_its_store_schemas():
    storage = CheckpointStorage(str(OUR_FIXTURES / "stream_stream_join" / "checkpoint"))

    metadata = find_operator_state_metadata(storage, 0)
    schemas = [find_store_schema(storage, 0, name) for name in metadata.store_names]

    assert [schema.path for schema in schemas] == [f"state/0/0/{name}/_metadata/schema" for name in JOIN_STORES]
    assert simple_string(schemas[1].value_schema) == _key_with_index("left")[1]
    assert simple_string(schemas[0].key_schema) == KEY_TO_NUM_VALUES[0]


def test_find_functions_return_none_where_spark_wrote_no_file():
    old_join = CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-version-2.4.0-streaming-join"))
    spark_32 = CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-version-3.2.0-deduplication-with-repartition"))

    assert find_store_schema(old_join, 0, "left-keyToNumValues") is None
    assert find_operator_state_metadata(old_join, 0) is None
    assert find_operator_state_metadata(spark_32, 0) is None
    assert simple_string(find_store_schema(spark_32, 0).key_schema) == "struct<key1:int,key2:int>"


def test_a_damaged_schema_file_found_through_storage_names_its_relative_path(tmp_path):
    root = tmp_path / "checkpoint"
    shutil.copytree(OUR_FIXTURES / "file_source_dedup" / "checkpoint" / "state", root / "state")
    schema = root / "state/0/0/_metadata/schema"
    schema.write_bytes(schema.read_bytes()[:40])

    with pytest.raises(TruncatedFileError, match=r"^state/0/0/_metadata/schema: key schema: needs"):
        find_store_schema(CheckpointStorage(str(root)), 0)
