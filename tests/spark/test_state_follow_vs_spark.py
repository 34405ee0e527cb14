"""State figures followed batch by batch equal Spark's `statestore` reader and a cold read.

A real PySpark windowed aggregation (windows evicted by the watermark: removals in every delta
or changelog) runs a few batches at a time, on HDFS-backed and on RocksDB (changelog
checkpointing) state. After each run a sync follows the new batches from the key sets it keeps;
every partition's rows must then equal what Spark's own reader returns at the newest committed
batch, and the key set of a cold read of that version.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from dashboards.models import SyncRun
from factories import make_checkpoint
from pipelines.generate_fixtures import RATE, ROCKSDB_CHANGELOG_CONF, session_conf
from pipelines.queries import stop_between_batches, windowed_agg_noop_query
from workers.checkpoint.logdir import list_batch_ids
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statefollow import read_state_keys
from workers.checkpoint.statekeys import parse_state_keys
from workers.checkpoint.statesummary import StateConf
from workers.checkpoint.storage import CheckpointStorage
from workers.state_follow import keys_path
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

# Snapshots (zips) every 2 versions, so that the followed versions cross some.
COMMON_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
}
PROVIDERS = {
    "hdfs": {"spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"},
    "rocksdb": ROCKSDB_CHANGELOG_CONF,
}
FIRST_BATCHES = 3
STEPS = 3
WAIT_SECONDS = 240


def _run_until(spark, base: Path, conf: dict[str, str], batch_id: int) -> None:
    """Run the query (again) until it has committed ``batch_id``, then stop it between batches."""
    with session_conf(spark, {**COMMON_CONF, **conf}):
        query = windowed_agg_noop_query(spark, base, base.name, RATE).trigger(processingTime="1 second").start()
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while (query.lastProgress or {}).get("batchId", -1) < batch_id:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, f"the query did not commit batch {batch_id} in {WAIT_SECONDS} s"
                time.sleep(0.05)
        finally:
            stop_between_batches(query, timeout_seconds=30)


def _spark_counts(spark, checkpoint: Path, batch_id: int) -> dict[int, int]:
    frame = spark.read.format("statestore").option("batchId", batch_id).load(str(checkpoint))
    return {row["partition_id"]: row["count"] for row in frame.groupBy("partition_id").agg(F.count("*").alias("count")).collect()}


def _cold_rows(checkpoint: Path, version: int) -> dict[int, int]:
    storage = CheckpointStorage(str(checkpoint))
    conf = StateConf("lz4", False)
    return {store.partition: read_state_keys(storage, store, version, conf=conf).rows for store in list_state_store_dirs(storage)}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_followed_rows_equal_sparks_reader_and_a_cold_read_after_each_new_batch(spark, tmp_path, settings, provider):
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    settings.INSPECT_INTERVAL_SECONDS = 24 * 3600  # the full pass runs on the first sync only,
    settings.RECONCILE_INTERVAL_SECONDS = 24 * 3600  # the later syncs are probes
    base = tmp_path / provider
    checkpoint_dir = base / "checkpoint"
    _run_until(spark, base, PROVIDERS[provider], FIRST_BATCHES - 1)
    checkpoint = make_checkpoint(name=provider, url=str(checkpoint_dir))
    sync_checkpoint(checkpoint.pk)

    for step in range(STEPS):
        newest_before = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "commits")[-1]
        _run_until(spark, base, PROVIDERS[provider], newest_before + 1)
        run = sync_checkpoint(checkpoint.pk)
        newest = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "commits")[-1]

        assert run.status == SyncRun.Status.OK and run.new_commits >= 1, (step, run.message)
        # The first follow reads cold (no key set kept yet) and lists; the next ones read new files only.
        assert (run.list_calls == 0) == (step > 0), (step, run.list_calls)
        rows = list(checkpoint.state_partitions.order_by("partition"))
        assert [(row.rows_version, row.note, row.provider) for row in rows] == [(newest + 1, "", provider)] * 2, step
        theirs = _spark_counts(spark, checkpoint_dir, newest)
        assert {row.partition: row.rows for row in rows} == {p: theirs.get(p, 0) for p in (0, 1)}, step
        assert {row.partition: row.rows for row in rows} == _cold_rows(checkpoint_dir, newest + 1), step
        for row in rows:
            kept = parse_state_keys(keys_path(checkpoint, row).read_bytes(), source="kept")
            assert (kept.version, kept.rows) == (newest + 1, row.rows)
    assert sum(row.rows for row in rows) > 0
