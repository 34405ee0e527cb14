"""RocksDB rows read from SST files and changelogs equal what Spark's `statestore` source returns.

For every RocksDB fixture (changelog checkpointing on and off, checkpoint format 1 and 2, an
aggregation, a deduplication, a stream-stream join's four stores and a streaming limit), at its
last committed batches: per store and partition, the row count (rocksdbrows.read_rocksdb_rows,
and the summary the sync stores) and every decoded row (statesample.sample_state_rows) equal
Spark's reading of the same state version. A fresh run with row tracking off (numKeys -1 in the
zips) checks the path that iterates the zip's keys.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from pipelines.generate_fixtures import QUERY_NAMES, RATE, ROCKSDB_CHANGELOG_CONF, session_conf
from pipelines.queries import stop_between_batches, windowed_agg_noop_query
from spark_state_rows import comparable_rows, spark_rows
from workers.checkpoint.logdir import list_batch_ids, read_commit
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.rocksdbrows import read_rocksdb_rows
from workers.checkpoint.rocksdbstate import list_rocksdb_store_files
from workers.checkpoint.stateinventory import DEFAULT_STORE_NAME, list_state_store_dirs
from workers.checkpoint.statesample import sample_state_rows
from workers.checkpoint.stateschema import find_store_schema
from workers.checkpoint.statesummary import read_checkpoint_state
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

ROCKSDB_FIXTURES = tuple(name for name in QUERY_NAMES if name.startswith("rocksdb_"))
# Spark 4.3's statestore source takes checkpointFormatVersion from the session (the offset log
# does not record it): format 2 must be set to read format 2.
FORMAT_2_CONF = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}
BATCHES_COMPARED = 3
ALL_ROWS = 10_000_000
# Row tracking off: zips say numKeys -1. A zip every 2 changelogs, so versions load as zip + changelogs.
UNTRACKED_CONF = {
    **ROCKSDB_CHANGELOG_CONF,
    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    "spark.sql.shuffle.partitions": "2",
}
UNTRACKED_BATCHES = 8


def _is_format_2(storage: CheckpointStorage) -> bool:
    return any(
        list_rocksdb_store_files(storage, store).checkpoint_format == 2 for store in list_state_store_dirs(storage)
    )


def _spark_frame(spark, checkpoint: Path, batch_id: int, store: str, is_format_2: bool):
    with session_conf(spark, FORMAT_2_CONF if is_format_2 else {}):
        reader = spark.read.format("statestore").option("batchId", batch_id).option("operatorId", 0)
        return reader.option("storeName", store).load(str(checkpoint)).cache()


def _unique_ids(storage: CheckpointStorage, store) -> dict[int, str]:
    if store.store != DEFAULT_STORE_NAME:
        return {}  # the only unique id the files carry (read_rocksdb_version)
    commits = {batch: read_commit(storage, batch) for batch in list_batch_ids(storage, "commits")}
    return state_unique_ids_by_version(commits, operator=store.operator, partition=store.partition)


def _compare_batch(spark, checkpoint: Path, batch_id: int) -> int:
    """Compare counts and decoded rows of every store and partition at ``batch_id``; return rows compared."""
    storage = CheckpointStorage(str(checkpoint))
    is_format_2, version, compared = _is_format_2(storage), batch_id + 1, 0
    for store in list_state_store_dirs(storage):
        frame = _spark_frame(spark, checkpoint, batch_id, store.store, is_format_2)
        expected = spark_rows(frame, store.partition)
        unique_id = _unique_ids(storage, store).get(version)
        count = read_rocksdb_rows(storage, store, version, codec="lz4", unique_id=unique_id)
        assert count.rows == len(expected), (store.path, version, count.how)
        schema = find_store_schema(storage, store.operator, store.store)
        rows = sample_state_rows(
            storage,
            store,
            version,
            limit=ALL_ROWS,
            key_schema=schema.key_schema,
            value_schema=schema.value_schema,
            codec="lz4",
            row_checksum=False,
            unique_id=unique_id,
        )
        assert comparable_rows(rows, schema) == expected, (store.path, version)
        frame.unpersist()
        compared += len(expected)
    return compared


@pytest.mark.parametrize("fixture", ROCKSDB_FIXTURES)
def test_rows_and_decoded_rows_equal_sparks_statestore_reader_at_the_last_committed_batches(spark, tmp_path, fixture):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(OUR_FIXTURES / fixture / "checkpoint", checkpoint)
    batches = list_batch_ids(CheckpointStorage(str(checkpoint)), "commits")[-BATCHES_COMPARED:]

    compared = [_compare_batch(spark, checkpoint, batch_id) for batch_id in batches]

    assert len(compared) == BATCHES_COMPARED and sum(compared) > 0


@pytest.mark.parametrize("fixture", ROCKSDB_FIXTURES)
def test_the_summary_counts_every_partition_at_the_version_a_restart_loads(spark, tmp_path, fixture):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(OUR_FIXTURES / fixture / "checkpoint", checkpoint)
    storage = CheckpointStorage(str(checkpoint))
    last = list_batch_ids(storage, "commits")[-1]

    summaries = read_checkpoint_state(storage)

    assert {s.rows_version for s in summaries} == {last + 1}, [s.note for s in summaries]
    for store in sorted({s.store for s in summaries}):
        frame = _spark_frame(spark, checkpoint, last, store, _is_format_2(storage))
        theirs = {row["partition_id"]: row["count"] for row in frame.groupBy("partition_id").count().collect()}
        ours = {s.partition: s.rows for s in summaries if s.store == store}
        assert ours == {partition: theirs.get(partition, 0) for partition in ours}, store


def _run_untracked(spark, base: Path) -> Path:
    """Run the windowed aggregation on RocksDB with row tracking off until UNTRACKED_BATCHES commit
    and Spark's maintenance thread has uploaded a snapshot (a zip): when it does depends on the
    machine's speed, so the test waits for the file it needs instead of counting batches."""
    state = base / "checkpoint" / "state"
    with session_conf(spark, UNTRACKED_CONF):
        query = windowed_agg_noop_query(spark, base, base.name, RATE).trigger(processingTime="1 second").start()
        try:
            deadline = time.monotonic() + 240
            while (query.lastProgress or {}).get("batchId", -1) < UNTRACKED_BATCHES - 1 or not any(
                state.rglob("*.zip")
            ):
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, (
                    f"in 240 s the query did not commit {UNTRACKED_BATCHES} batches with a snapshot (zip) uploaded"
                )
                time.sleep(0.05)
        finally:
            stop_between_batches(query, timeout_seconds=30)
    return base / "checkpoint"


def test_with_row_tracking_off_the_zip_keys_are_iterated_and_equal_sparks_rows(spark, tmp_path):
    checkpoint = _run_untracked(spark, tmp_path / "untracked")
    storage = CheckpointStorage(str(checkpoint))
    batches = list_batch_ids(storage, "commits")
    hows = [
        read_rocksdb_rows(storage, store, batch + 1, codec="lz4").how
        for batch in batches[-BATCHES_COMPARED:]
        for store in list_state_store_dirs(storage)
    ]
    # The path under test: some version loads from a zip whose numKeys is -1.
    assert any("numKeys -1" in how for how in hows), hows

    for batch_id in batches[-BATCHES_COMPARED:]:
        _compare_batch(spark, checkpoint, batch_id)
