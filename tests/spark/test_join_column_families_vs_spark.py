"""A RocksDB stream-stream join whose state has column families, as ckptweb reads it, equals Spark.

Spark 4.3 still writes join state format 2 by default (four stores, no column families: the
rocksdb_stream_join fixture). With ``spark.sql.streaming.join.stateFormatVersion`` 3 or 4 it
keeps the join's stores as column families of one ``default`` store. For each, a real join
(pipelines/queries.py's, 4 batches, RocksDB with changelogs) is read at its last committed
version: every family's rows per partition equal Spark's ``statestore`` reader with
``storeName``, and so does every decoded row (format 4's keys carry their event time, and its
families hold a list of values per key, which Spark's reader returns one row each), and
the store's rows equal the numRowsTotal Spark reported for that batch.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pipelines.generate_fixtures import JOIN_LEFT, JOIN_RIGHT, ROCKSDB_CHANGELOG_CONF, session_conf
from pipelines.generate_fixtures import _wait_for_batch as wait_for_batch
from pipelines.queries import stop_between_batches, stream_stream_join_query
from workers.checkpoint.logdir import list_batch_ids
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statesummary import read_checkpoint_state, summarize_stores
from workers.checkpoint.statevariablerows import sample_state_variable_rows, undecoded_reason
from workers.checkpoint.statevariables import count_state_variables, read_state_variables
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

LAST_BATCH = 3
ALL_ROWS = 1_000_000


def _run_join(spark, base: Path, state_format: str) -> dict:
    """Run the join until batch LAST_BATCH is committed; return the progress of the newest
    committed batch that reported one. On a busy machine the query may run on and be stopped
    inside a batch: what that batch wrote is not committed, and both readers read at the batch
    given."""
    conf = {
        **ROCKSDB_CHANGELOG_CONF,
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.streaming.join.stateFormatVersion": state_format,
    }
    with session_conf(spark, conf):
        query = stream_stream_join_query(spark, base, JOIN_LEFT, JOIN_RIGHT).trigger(processingTime="2 seconds").start()
    try:
        wait_for_batch(query, LAST_BATCH)
    finally:
        stop_between_batches(query, timeout_seconds=60)
    committed = set(list_batch_ids(CheckpointStorage(str(base / "checkpoint")), "commits"))
    return [p for p in query.recentProgress if p["batchId"] in committed and p["stateOperators"]][-1]


def _spark_rows(spark, checkpoint: Path, family: str, batch_id: int) -> list:
    reader = spark.read.format("statestore").option("storeName", family).option("batchId", batch_id)
    return reader.load(str(checkpoint)).collect()


def _as_plain(row: dict) -> dict:
    """Timestamps as PySpark collects them: naive, in the local time zone."""
    return {name: _local(value) for name, value in row.items()}


def _values(row) -> list:
    """A row's values as Spark's reader returns them: one row per element of a list (format 4's
    families hold several values per key)."""
    return row.value if isinstance(row.value, list) else [row.value]


def _local(value):
    return value.astimezone().replace(tzinfo=None) if getattr(value, "tzinfo", None) else value


@pytest.mark.parametrize("state_format", ["3", "4"])
def test_join_column_families_have_sparks_rows(spark, tmp_path, state_format):
    progress = _run_join(spark, tmp_path, state_format)
    checkpoint = tmp_path / "checkpoint"
    storage = CheckpointStorage(str(checkpoint))
    version = progress["batchId"] + 1
    variables = [v for v in read_state_variables(storage, 0) if v.kind != "default"]
    assert {v.serves for v in variables} == {"left", "right"} and len(variables) == 4
    assert [undecoded_reason(v) for v in variables] == [None] * 4

    for variable in variables:
        theirs = _spark_rows(spark, checkpoint, variable.name, progress["batchId"])
        ours, decoded = Counter(), []
        for store in list_state_store_dirs(storage):
            figures = {f.name: f for f in count_state_variables(storage, store, version, variables, codec="lz4")}
            ours[store.partition] = figures[variable.name].values
            rows = sample_state_variable_rows(
                storage, store, version, variable, limit=ALL_ROWS, codec="lz4", encoding=None
            )
            decoded += [(store.partition, row.key, _as_plain(value)) for row in rows for value in _values(row)]
        assert +ours == Counter(row["partition_id"] for row in theirs), variable.name
        expected = [(row["partition_id"], row["key"].asDict(), _as_plain(row["value"].asDict())) for row in theirs]
        assert sorted(map(repr, decoded)) == sorted(map(repr, expected)), variable.name
    (store_total,) = summarize_stores(read_checkpoint_state(storage))
    assert store_total.rows == progress["stateOperators"][0]["numRowsTotal"]
