"""Row counts that workers.checkpoint.rocksdbstate claims for RocksDB stores equal what Spark reads.

Spark's reference is its `statestore` data source (`batchId` B reads state version B + 1, per
`partition_id`). Two sources of checkpoints: copies of the committed RocksDB fixtures (counts
from a zip's numKeys), and short fresh runs without any zip (minDeltasForSnapshot far above the
number of batches), where every count comes from replaying the changelogs from version 0, in
checkpoint format 1 (`<v>.changelog`, v1) and format 2 (`<v>_<uuid>.changelog`, v3 + lineage).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from pipelines.generate_fixtures import QUERY_CONF, RATE, ROCKSDB_CHANGELOG_CONF, session_conf
from pipelines.queries import rate_dedup_noop_query, stop_between_batches, windowed_agg_noop_query
from workers.checkpoint.logdir import read_commit
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.rocksdbstate import summarize_rocksdb_store
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

ROCKSDB_FIXTURES = ("rocksdb_changelog_agg", "rocksdb_checkpoint_v2_dedup")
# Spark 4.3's statestore source takes checkpointFormatVersion from the session, not from the
# checkpoint (the offset log does not record it): format 2 must be set to read format 2.
FORMAT_2_CONF = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}
FRESH_BATCHES = 4
# The session of the tests has Spark's default 200 shuffle partitions; the fixtures have 2.
NO_SNAPSHOT_CONF = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000", "spark.sql.shuffle.partitions": "2"}
FRESH_RUNS = {
    "format1_agg": (windowed_agg_noop_query, ROCKSDB_CHANGELOG_CONF),
    "format2_dedup": (rate_dedup_noop_query, QUERY_CONF["rocksdb_checkpoint_v2_dedup"]),
}


def committed_batches(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def our_claimed_counts(checkpoint: Path) -> dict[tuple[int, int], int]:
    """(state version, partition) -> the row count rocksdbstate claims for operator 0."""
    storage = CheckpointStorage(str(checkpoint))
    commits = {batch: read_commit(storage, batch) for batch in committed_batches(checkpoint)}
    claimed = {}
    for store in list_state_store_dirs(storage):
        ids = state_unique_ids_by_version(commits, operator=store.operator, partition=store.partition)
        summary = summarize_rocksdb_store(storage, store, codec="lz4", unique_ids=ids)
        assert summary.errors == ()
        claimed.update({(s.version, store.partition): s.num_rows for s in summary.versions if s.num_rows is not None})
    return claimed


def spark_counts(spark, checkpoint: Path, batch_id: int) -> dict[int, int]:
    """partition -> rows Spark's statestore source reads at `batch_id` (state version batch_id + 1)."""
    is_format_2 = any("_" in p.name for p in (checkpoint / "state" / "0" / "0").glob("*.changelog"))
    with session_conf(spark, FORMAT_2_CONF if is_format_2 else {}):
        frame = spark.read.format("statestore").option("batchId", batch_id).load(str(checkpoint))
        return {row["partition_id"]: row["count"] for row in frame.groupBy("partition_id").count().collect()}


def assert_claims_match_spark(spark, checkpoint: Path, claimed: dict[tuple[int, int], int]) -> int:
    """Compare every claimed count of a committed batch with Spark; return how many were compared."""
    compared = 0
    for batch_id in committed_batches(checkpoint):
        ours = {partition: rows for (version, partition), rows in claimed.items() if version == batch_id + 1}
        if ours:
            theirs = spark_counts(spark, checkpoint, batch_id)
            assert ours == {p: theirs.get(p, 0) for p in ours}, f"batch {batch_id}"
            compared += len(ours)
    return compared


@pytest.mark.parametrize("name", ROCKSDB_FIXTURES)
def test_zip_row_counts_of_the_committed_fixtures_equal_the_state_spark_reads(spark, tmp_path, name):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(OUR_FIXTURES / name / "checkpoint", checkpoint)
    assert assert_claims_match_spark(spark, checkpoint, our_claimed_counts(checkpoint)) >= 2


def run_a_few_batches(spark, base: Path, query_builder, conf: dict[str, str]) -> None:
    """Run the query until FRESH_BATCHES batches are committed, then stop it between batches."""
    with session_conf(spark, {**conf, **NO_SNAPSHOT_CONF}):
        query = query_builder(spark, base, base.name, RATE).trigger(processingTime="1 second").start()
        try:
            deadline = time.monotonic() + 180
            while (query.lastProgress or {}).get("batchId", -1) < FRESH_BATCHES - 1:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, (
                    f"timed out after 180 s waiting for batch {FRESH_BATCHES - 1} of {base.name}"
                )
                time.sleep(0.05)
        finally:
            stop_between_batches(query, timeout_seconds=30)


@pytest.mark.parametrize("run", sorted(FRESH_RUNS))
def test_changelog_replays_from_version_0_count_the_rows_spark_reads_at_every_batch(spark, tmp_path, run):
    query_builder, conf = FRESH_RUNS[run]
    base = tmp_path / run
    run_a_few_batches(spark, base, query_builder, conf)
    checkpoint = base / "checkpoint"
    claimed = our_claimed_counts(checkpoint)
    batches = committed_batches(checkpoint)
    assert batches[:FRESH_BATCHES] == list(range(FRESH_BATCHES))
    # No zip was written, so every committed version of both partitions is counted by replay.
    assert {(batch + 1, partition) for batch in batches for partition in (0, 1)} <= claimed.keys()
    assert assert_claims_match_spark(spark, checkpoint, claimed) == 2 * len(batches)
