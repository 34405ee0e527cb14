"""Sampling decoded state rows of the PySpark 4.3.0 fixtures at a version.

The number of rows a store holds at version N + 1 is what Spark reported as ``numRowsTotal`` in
the progress of batch N (spark-report.json, written by the generator from ``query.recentProgress``);
for a join that is the rows of the two keyWithIndexToValue stores. Spark's own state reader is
compared row by row in tests/spark/test_state_keys_vs_spark.py.
"""

from __future__ import annotations

import json
import shutil

import pytest

from fixture_paths import OUR_FIXTURES
from state_corpus import ROCKSDB_STATE_CHECKPOINTS
from workers.checkpoint.errors import CorruptFileError, MissingFileError
from workers.checkpoint.logdir import list_batch_ids, read_offset_seq
from workers.checkpoint.sparktypes import AtomicType, StructField, StructType
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statesample import sample_state_rows
from workers.checkpoint.stateschema import find_store_schema
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

HDFS_FIXTURES = (
    "windowed_agg_file_sink",
    "file_source_dedup",
    "stream_stream_join",
    "killed_mid_batch",
    "hdfs_zstd_row_checksum",
)
ROCKSDB_FIXTURES = ROCKSDB_STATE_CHECKPOINTS
CODEC = "spark.sql.streaming.stateStore.compression.codec"
ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
NO_LIMIT = 1_000_000


def _state_conf(storage: CheckpointStorage) -> tuple[str | None, bool]:
    """The codec and row-checksum setting persisted in the newest offset log entry."""
    conf = read_offset_seq(storage, list_batch_ids(storage, "offsets")[-1]).metadata.conf
    return conf.get(CODEC), conf.get(ROW_CHECKSUM) == "true"


def _sample(storage: CheckpointStorage, store_dir, version: int, limit: int = NO_LIMIT):
    codec, row_checksum = _state_conf(storage)
    schema = find_store_schema(storage, store_dir.operator, store_dir.store)
    return sample_state_rows(
        storage,
        store_dir,
        version,
        limit=limit,
        key_schema=schema.key_schema,
        value_schema=schema.value_schema,
        codec=codec,
        row_checksum=row_checksum,
    )


def _rows_total_by_version(fixture: str) -> dict[int, int]:
    """numRowsTotal of the one stateful operator after each reported batch, by state version."""
    report = json.loads((OUR_FIXTURES / fixture / "spark-report.json").read_text())
    return {p["batchId"] + 1: p["stateOperators"][0]["numRowsTotal"] for p in report["progress"]}


def _counted_stores(storage: CheckpointStorage):
    # A join's numRowsTotal counts the stored input rows (keyWithIndexToValue), not the counters.
    return [d for d in list_state_store_dirs(storage) if not d.store.endswith("keyToNumValues")]


def _rows_at(storage: CheckpointStorage, store_dirs, version: int) -> int | None:
    """The rows of the stores at ``version``, or None when its files were purged by maintenance."""
    try:
        return sum(len(_sample(storage, store_dir, version)) for store_dir in store_dirs)
    except MissingFileError:
        return None


@pytest.mark.parametrize("fixture", HDFS_FIXTURES + ROCKSDB_FIXTURES)
def test_rows_at_each_version_add_up_to_the_num_rows_total_spark_reported(fixture):
    storage = CheckpointStorage(str(OUR_FIXTURES / fixture / "checkpoint"))
    store_dirs = _counted_stores(storage)
    expected = _rows_total_by_version(fixture)

    found = {version: _rows_at(storage, store_dirs, version) for version in expected}
    found = {version: rows for version, rows in found.items() if rows is not None}

    assert len(found) >= 2, "at least two versions of every fixture can be rebuilt"
    assert found == {version: expected[version] for version in found}


def test_a_limit_returns_the_first_rows_of_the_full_sample():
    storage = CheckpointStorage(str(OUR_FIXTURES / "stream_stream_join" / "checkpoint"))
    store_dir = next(d for d in list_state_store_dirs(storage) if d.store == "left-keyWithIndexToValue")

    everything = _sample(storage, store_dir, 12)

    assert len(everything) > 3
    assert _sample(storage, store_dir, 12, limit=3) == everything[:3]
    assert _sample(storage, store_dir, 12, limit=0) == []


def test_rows_of_a_zstd_store_with_row_checksums_equal_those_of_the_same_query_in_lz4():
    # Both fixtures run the same windowed aggregation over the same rate-micro-batch input.
    def rows(fixture: str) -> list:
        storage = CheckpointStorage(str(OUR_FIXTURES / fixture / "checkpoint"))
        return [row for store_dir in list_state_store_dirs(storage) for row in _sample(storage, store_dir, 12)]

    assert rows("hdfs_zstd_row_checksum") == rows("windowed_agg_file_sink")


def test_a_missing_delta_is_a_missing_file_error_naming_it(tmp_path):
    shutil.copytree(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", tmp_path / "c")
    (tmp_path / "c/state/0/0/11.delta").unlink()
    storage = CheckpointStorage(str(tmp_path / "c"))
    store_dir = list_state_store_dirs(storage)[0]

    with pytest.raises(MissingFileError, match=r"^state/0/0/11\.delta: "):
        _sample(storage, store_dir, 11)


def test_a_rocksdb_version_whose_changelog_is_gone_is_a_missing_file_error_naming_it(tmp_path):
    shutil.copytree(OUR_FIXTURES / "rocksdb_changelog_agg" / "checkpoint", tmp_path / "c")
    (tmp_path / "c/state/0/0/11.changelog").unlink()
    storage = CheckpointStorage(str(tmp_path / "c"))
    store_dir = list_state_store_dirs(storage)[0]

    with pytest.raises(
        MissingFileError, match=r"^state/0/0: version 11 cannot be loaded: missing changelog 11\.changelog"
    ):
        _sample(storage, store_dir, 11)


@pytest.mark.parametrize("partition", [0, 1])
def test_rocksdb_rows_replayed_from_an_older_zip_equal_those_of_the_zip_spark_wrote_later(tmp_path, partition):
    shutil.copytree(OUR_FIXTURES / "rocksdb_changelog_agg" / "checkpoint", tmp_path / "c")
    storage = CheckpointStorage(str(tmp_path / "c"))
    store_dir = list_state_store_dirs(storage)[partition]
    from_zip = _sample(storage, store_dir, 12)

    # Without 12.zip, version 12 loads as 10.zip + 11.changelog + 12.changelog.
    (tmp_path / f"c/state/0/{partition}/12.zip").unlink()
    without_zip = list_state_store_dirs(storage)[partition]
    replayed = _sample(storage, without_zip, 12)

    assert len(from_zip) > 0
    assert sorted(map(repr, replayed)) == sorted(map(repr, from_zip))
    assert _sample(storage, without_zip, 12, limit=1) == replayed[:1]


def test_a_row_that_does_not_fit_the_schema_names_the_file_that_put_it():
    storage = CheckpointStorage(str(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"))
    store_dir = list_state_store_dirs(storage)[0]
    schema = find_store_schema(storage, 0)
    too_wide = StructType(tuple(StructField(f"n{i}", AtomicType("long")) for i in range(5)))

    with pytest.raises(CorruptFileError, match=r"^state/0/0/9\.snapshot: value row: 16 bytes cannot hold 5 fields"):
        sample_state_rows(
            storage,
            store_dir,
            9,
            limit=1,
            key_schema=schema.key_schema,
            value_schema=too_wide,
            codec="lz4",
            row_checksum=False,
        )
