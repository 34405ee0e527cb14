"""Metadata-log maintenance checked by real PySpark: expire (compactible logs) and purge (offsets, commits).

Each test runs the same deterministic query into a control and a maintained directory, applies
the action to the maintained one only, then restarts both (tests/spark/restart.py) and requires
the same new output. For the expiry, Spark's own reader of the sink directory (spark.read, which
lists files through ``_spark_metadata``) must also return the same rows before the restart.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipelines.generate_fixtures import session_conf, write_dedup_input
from pipelines.queries import FIXTURE_START_MS, RateSpec, file_source_dedup_query, json_file_sink, rate_events
from spark.restart import read_output_rows, restart_twins, run_triggers, run_twins
from workers.checkpoint.maintenance.compaction import apply_compaction, plan_compaction
from workers.checkpoint.maintenance.purge import apply_purge, plan_purge
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

# Spark keeps every log file (no deletion), compacts every 3 batches.
KEEP_LOGS_CONF = {
    "spark.sql.streaming.fileSink.log.deletion": "false",
    "spark.sql.streaming.fileSource.log.deletion": "false",
    "spark.sql.streaming.fileSink.log.compactInterval": "3",
    "spark.sql.streaming.fileSource.log.compactInterval": "3",
}


def file_source_dedup_builder(spark, base: Path):
    """One more input file per start, so every AvailableNow run reads exactly one new file."""
    input_dir = base / "input"
    input_dir.mkdir(parents=True, exist_ok=True)
    write_dedup_input(input_dir, sum(1 for p in input_dir.iterdir() if p.suffix == ".json"))
    return file_source_dedup_query(spark, base)


def stateless_rate_builder(spark, base: Path):
    rows = rate_events(spark, RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000))
    return json_file_sink(rows.selectExpr("value", "timestamp"), base, "purge_logs")


def log_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def test_expired_source_and_sink_log_files_are_not_missed_by_spark(spark, tmp_path):
    # For the whole test, not only while a run starts: the file source reads its log settings
    # from the session the reader was built in, on the query's thread, after start() returned.
    with session_conf(spark, KEEP_LOGS_CONF):
        expire_and_restart(spark, tmp_path)


def expire_and_restart(spark, tmp_path: Path) -> None:
    twin = run_twins(spark, file_source_dedup_builder, tmp_path, triggers=8, conf=KEEP_LOGS_CONF)
    checkpoint = CheckpointStorage(str(twin.maintained_checkpoint))
    sink = CheckpointStorage(str(twin.maintained / "output"))
    options = {
        "compact_interval": 3,
        "min_batches_to_retain": 2,
        "cleanup_delay_seconds": 0,
        "quiet_seconds": 0,
        "now": time.time(),
    }
    plans = [
        (sink, plan_compaction(sink, None, checkpoint_storage=checkpoint, **options)),
        (checkpoint, plan_compaction(checkpoint, "sources/0", checkpoint_storage=checkpoint, **options)),
    ]
    for storage, plan in plans:
        assert plan.deletes and not plan.writes, plan.summary
        assert plan.is_allowed(), plan.preconditions
        apply_compaction(storage, plan)

    sink_log = twin.maintained / "output/_spark_metadata"
    assert len(log_names(sink_log)) < len(log_names(twin.control / "output/_spark_metadata"))
    assert read_output_rows(spark, twin.maintained) == read_output_rows(spark, twin.control)
    restart_twins(spark, file_source_dedup_builder, twin, triggers=3, conf=KEEP_LOGS_CONF)
    assert read_output_rows(spark, twin.maintained) == read_output_rows(spark, twin.control)


def test_a_purged_checkpoint_restarts_with_the_same_output(spark, tmp_path):
    twin = run_twins(spark, stateless_rate_builder, tmp_path, triggers=6)
    storage = CheckpointStorage(str(twin.maintained_checkpoint))
    plan = plan_purge(storage, keep_batches=1, quiet_seconds=0, now=time.time())
    assert plan.deletes and plan.is_allowed(), (plan.summary, plan.preconditions)
    apply_purge(storage, plan)
    latest = max(int(name) for name in log_names(twin.maintained_checkpoint / "commits"))
    # The offsets before the latest stay: the restart reads them (MicroBatchExecution).
    assert log_names(twin.maintained_checkpoint / "offsets") == sorted([str(latest - 1), str(latest)])

    restart_twins(spark, stateless_rate_builder, twin, triggers=3)


def test_a_compaction_file_written_for_a_changed_interval_lets_spark_go_on(spark, tmp_path):
    # Three runs at Spark's default interval 10 leave sources/0/0, 1 and 2 as plain files. Restarted
    # with fileSource.log.compactInterval 3, Spark reads batch 2 as 2.compact and fails for want of
    # it; our compaction writes it from 0, 1 and the plain 2, then the query goes on.
    twin = run_twins(spark, file_source_dedup_builder, tmp_path, triggers=3)
    assert log_names(twin.maintained_checkpoint / "sources/0") == ["0", "1", "2"]
    checkpoint = CheckpointStorage(str(twin.maintained_checkpoint))
    plan = plan_compaction(
        checkpoint,
        "sources/0",
        checkpoint_storage=checkpoint,
        compact_interval=3,
        expire=False,
        quiet_seconds=0,
        now=time.time(),
    )
    assert [w.path for w in plan.writes] == ["sources/0/2.compact"] and plan.is_allowed(), plan.preconditions
    apply_compaction(checkpoint, plan)

    control = run_triggers(spark, file_source_dedup_builder, twin.control, 3)
    with session_conf(spark, {"spark.sql.streaming.fileSource.log.compactInterval": "3"}):
        maintained = run_triggers(spark, file_source_dedup_builder, twin.maintained, 3)
    assert maintained.batch_ids == control.batch_ids
    assert "5.compact" in log_names(twin.maintained_checkpoint / "sources/0")
    assert read_output_rows(spark, twin.maintained) == read_output_rows(spark, twin.control)
