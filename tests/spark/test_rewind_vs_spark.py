"""Rewind and undo on a real query, judged by Spark: the rewound query redoes its batches as the first time.

A file source (one input file per batch) -> watermark -> windowed count -> JSON file sink, with
the source and sink logs compacted every 3 batches, runs batches 0-6 uninterrupted; its output
and Spark's ``statestore`` rows of every batch after 3 are kept. It is rewound to batch 3
(across a compaction of both logs), undone (byte for byte against a copy, and Spark restarts the
undone checkpoint), rewound again and restarted: it must redo batches 4.. and end with the
uninterrupted output (no row lost, none twice, no data file left that the sink log does not
list) and the uninterrupted state rows at every batch after the restart. Once Spark ran on, the
undo of that rewind is refused. Both state store providers.

``now`` is one second ahead in the plans: the query-stopped precondition with ``quiet_seconds=0``
must not depend on the file system's timestamp granularity.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from pipelines.generate_fixtures import session_conf, write_dedup_input
from pipelines.queries import file_events, json_file_sink
from spark.maintenance_files import tree_differences
from spark.restart import last_committed_batch, read_output_rows, run_triggers
from workers.checkpoint.compactible import parse_sink_log_file
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

LOG_CONF = {
    "spark.sql.streaming.fileSink.log.compactInterval": "3",
    "spark.sql.streaming.fileSource.log.compactInterval": "3",
}
PROVIDERS = {
    "hdfs": {},
    # Without changelog checkpointing every version is a zip listing SST files: the rewind has SSTs to delete.
    "rocksdb": {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        )
    },
}
FIRST_FILES = 7  # batches 0..6, one file each
REWIND_TO = 3


def windowed_counts_builder(spark, base: Path):
    """Counts per 10-second window of the file rows' event time, 10-second watermark."""
    rows = file_events(spark, base / "input").withWatermark("event_time", "10 seconds")
    counts = rows.groupBy(F.window("event_time", "10 seconds")).agg(F.count("*").alias("rows"), F.sum("value"))
    return json_file_sink(counts, base, "rewind_windowed_counts")


def write_inputs(base: Path, indexes: range) -> None:
    (base / "input").mkdir(parents=True, exist_ok=True)
    for index in indexes:
        write_dedup_input(base / "input", index)


def state_rows(spark, checkpoint: Path, batch_id: int) -> list[str]:
    frame = spark.read.format("statestore").option("batchId", batch_id).load(str(checkpoint))
    return sorted(row[0] for row in frame.selectExpr("to_json(struct(*))").collect())


def unlisted_data_files(output: Path) -> set[str]:
    """Data files in ``output`` that no sink log file lists (left behind by a rewind that missed them)."""
    listed = set()
    for log_file in (output / "_spark_metadata").iterdir():
        if not log_file.name.startswith("."):
            listed |= {
                Path(s.path.removeprefix("file:")).name
                for s in parse_sink_log_file(log_file.read_bytes(), source=log_file.name)
            }
    return {p.name for p in output.glob("part-*") if p.name not in listed}


def plan_and_apply(action: str, base: Path, parameters: dict) -> None:
    checkpoint, sink = CheckpointStorage(str(base / "checkpoint")), CheckpointStorage(str(base / "output"))
    plan = plan_action(action, checkpoint, parameters, now=time.time() + 1, quiet_seconds=0, sink_storage=sink)
    assert plan.is_allowed(), (plan.summary, plan.failed_preconditions())
    assert plan.deletes or plan.writes, plan.summary
    apply_action(checkpoint, plan, parameters, sink_storage=sink)


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_rewound_query_redoes_its_batches_as_the_first_time_and_an_undo_restores_it(spark, tmp_path, provider):
    conf = {**LOG_CONF, **PROVIDERS[provider]}
    with session_conf(spark, conf):
        rewind_undo_and_restart(spark, tmp_path, conf)


def rewind_undo_and_restart(spark, tmp_path: Path, conf: dict) -> None:
    # The uninterrupted run: its output and its state at every batch after the one rewound to.
    base = tmp_path / "query"
    write_inputs(base, range(FIRST_FILES))
    last = run_triggers(spark, windowed_counts_builder, base, 1, conf=conf).last_batch
    assert last is not None and last >= FIRST_FILES - 1
    uninterrupted_rows = read_output_rows(spark, base)
    uninterrupted_state = {b: state_rows(spark, base / "checkpoint", b) for b in range(REWIND_TO + 1, last + 1)}
    assert uninterrupted_rows and all(uninterrupted_state.values())

    # Rewind, undo: byte for byte as before, and Spark restarts the undone checkpoint.
    before = tmp_path / "before"
    shutil.copytree(base, before, symlinks=True)
    plan_and_apply("rewind", base, {"to_batch": REWIND_TO, "backup_dir": "_ckptweb_backup/run-1"})
    assert last_committed_batch(base) == REWIND_TO
    plan_and_apply("undo", base, {"backup_dir": "_ckptweb_backup/run-1"})
    assert tree_differences(before, base) == []
    assert run_triggers(spark, windowed_counts_builder, base, 1, conf=conf).last_batch == last

    # Rewind again and restart: the batches after 3 are redone exactly as the first time.
    plan_and_apply("rewind", base, {"to_batch": REWIND_TO, "backup_dir": "_ckptweb_backup/run-2"})
    redone = run_triggers(spark, windowed_counts_builder, base, 1, conf=conf)
    assert redone.batch_ids[0] == REWIND_TO + 1 and redone.last_batch == last, redone
    assert read_output_rows(spark, base) == uninterrupted_rows
    assert unlisted_data_files(base / "output") == set()
    for batch_id, rows in uninterrupted_state.items():
        assert state_rows(spark, base / "checkpoint", batch_id) == rows, batch_id

    # Spark ran on since the rewind: undoing it would mix two histories.
    undo = plan_action(
        "undo",
        CheckpointStorage(str(base / "checkpoint")),
        {"backup_dir": "_ckptweb_backup/run-2"},
        now=time.time() + 1,
        quiet_seconds=0,
        sink_storage=CheckpointStorage(str(base / "output")),
    )
    assert [p.name for p in undo.failed_preconditions()] == ["unchanged-since-run"], undo.preconditions
