"""Snapshot + cleanup on a real query's checkpoint: Spark reads our snapshot and restarts from it.

Twin runs of the windowed aggregation (rate-micro-batch -> JSON file sink) with Spark's own
snapshots kept away. On the maintained twin our snapshot replaces the delta chain and cleanup
deletes the deltas it replaces, so Spark can only load the state through our file. Then Spark's
``statestore`` reader returns the same rows on both twins, and both restarts write the same rows.
"""

from __future__ import annotations

import time

import pytest

from pipelines.queries import FIXTURE_START_MS, RateSpec, windowed_agg_file_sink_query
from spark.restart import last_committed_batch, restart_twins, run_twins
from workers.checkpoint.maintenance.cleanup import apply_cleanup, plan_cleanup
from workers.checkpoint.maintenance.snapshot import apply_snapshot, plan_snapshot
from workers.checkpoint.stateinventory import list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

RATE = RateSpec(rows_per_batch=10, start_ms=FIXTURE_START_MS, advance_ms=2000)
TRIGGERS = 5
CODECS = {
    "lz4": {},
    "zstd-row-checksum": {
        "spark.sql.streaming.stateStore.compression.codec": "zstd",
        "spark.sql.streaming.stateStore.rowChecksum.enabled": "true",
    },
}


def _windowed_counts(spark, base):
    return windowed_agg_file_sink_query(spark, base, RATE)


def _state_rows(spark, checkpoint, batch_id: int) -> list[str]:
    frame = spark.read.format("statestore").option("batchId", batch_id).load(str(checkpoint))
    return sorted(row[0] for row in frame.selectExpr("to_json(struct(*))").collect())


@pytest.mark.parametrize("codec", list(CODECS))
def test_spark_reads_our_snapshot_and_restarts_from_it_with_the_control_s_output(spark, tmp_path, codec):
    conf = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000", **CODECS[codec]}
    twin = run_twins(spark, _windowed_counts, tmp_path, TRIGGERS, conf=conf)
    storage = CheckpointStorage(str(twin.maintained_checkpoint))

    # The version before the newest committed one: cleanup keeping 1 version then keeps version
    # `version` (our snapshot) and the newest delta, and deletes every delta the snapshot replaces.
    version = last_committed_batch(twin.maintained)
    snapshot = plan_snapshot(storage, now=time.time(), quiet_seconds=0, min_chain=3, version=version)
    assert snapshot.is_allowed() and len(snapshot.writes) == 2
    apply_snapshot(storage, snapshot)
    cleanup = plan_cleanup(
        storage, now=time.time(), quiet_seconds=0, min_versions_to_retain=1, keep_offsets_range=False
    )
    assert cleanup.is_allowed() and cleanup.deletes
    apply_cleanup(storage, cleanup)
    for store in list_state_store_dirs(storage):
        first = parse_hdfs_state_files(store.files)[0][0]
        assert (first.name, first.version) == (f"{version}.snapshot", version), store.path

    control_rows = _state_rows(spark, twin.control_checkpoint, version - 1)
    assert control_rows and _state_rows(spark, twin.maintained_checkpoint, version - 1) == control_rows

    restart_twins(spark, _windowed_counts, twin, 3, conf=conf)


ROCKSDB_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    )
}


def test_a_rocksdb_checkpoint_cleaned_by_us_reads_and_restarts_like_the_control(spark, tmp_path):
    # Without changelog checkpointing every commit uploads <version>.zip; Spark's own cleanup
    # (maintenance) is kept away, so the old zips and their SSTs are ours to delete.
    twin = run_twins(spark, _windowed_counts, tmp_path, TRIGGERS, conf=ROCKSDB_CONF)
    storage = CheckpointStorage(str(twin.maintained_checkpoint))
    cleanup = plan_cleanup(
        storage, now=time.time(), quiet_seconds=0, min_versions_to_retain=1, keep_offsets_range=False
    )
    assert cleanup.is_allowed() and any(d.path.endswith(".zip") for d in cleanup.deletes)
    apply_cleanup(storage, cleanup)
    last = last_committed_batch(twin.maintained)
    for store in list_state_store_dirs(storage):
        assert sorted(int(f.name.split(".")[0]) for f in store.files if f.name.endswith(".zip")) == [last, last + 1], (
            store.path
        )

    control_rows = _state_rows(spark, twin.control_checkpoint, last)
    assert control_rows and _state_rows(spark, twin.maintained_checkpoint, last) == control_rows

    restart_twins(spark, _windowed_counts, twin, 3, conf=ROCKSDB_CONF)
