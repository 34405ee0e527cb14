"""Repair against Spark: each damage shape, made on a copy of a real query's checkpoint, stops
Spark's restart; after the repair Spark restarts, runs a batch, and the integrity check finds no error.

One windowed aggregation (rate-micro-batch -> JSON file sink) runs three times once for the
module; each test copies its directory (checkpoint and output), damages the copy as a crash or a
hand edit does, and restarts it through the same session. A truncated latest commit and a hole
are also repaired with a backup and undone first: byte for byte as a copy of the damaged
checkpoint, and Spark refuses to restart it as before.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from pipelines.queries import FIXTURE_START_MS, RateSpec, windowed_agg_file_sink_query
from spark.maintenance_files import tree_differences
from spark.restart import last_committed_batch, run_triggers
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.maintenance.repair import apply_repair, plan_repair
from workers.checkpoint.maintenance.undo import apply_undo, plan_undo
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

RATE = RateSpec(rows_per_batch=10, start_ms=FIXTURE_START_MS, advance_ms=2000)
TEMP_NAME = ".{batch}.0f8fad5b-d9cb-469f-a165-70867728950e.tmp"


def _windowed_counts(spark, base):
    return windowed_agg_file_sink_query(spark, base, RATE)


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory) -> Path:
    """A query directory after three runs, every batch committed; copied, never changed, by the tests."""
    base = tmp_path_factory.mktemp("repair") / "query"
    run = run_triggers(spark, _windowed_counts, base, 3)
    assert run.last_batch is not None and run.last_batch >= 2, run
    return base


def _copy(written: Path, tmp_path: Path) -> tuple[Path, Path, int]:
    """The copied query directory, its checkpoint and its latest batch."""
    base = tmp_path / "query"
    shutil.copytree(written, base)
    return base, base / "checkpoint", last_committed_batch(base)


def _remove(checkpoint: Path, relpath: str) -> None:
    """Remove a log file and its Hadoop checksum, as a crash on an object store leaves none."""
    directory, name = os.path.split(relpath)
    (checkpoint / relpath).unlink()
    (checkpoint / directory / f".{name}.crc").unlink(missing_ok=True)


def _replace(checkpoint: Path, relpath: str, data: bytes) -> None:
    _remove(checkpoint, relpath)
    (checkpoint / relpath).write_bytes(data)


def _errors(checkpoint: Path) -> list:
    return [f for f in check_checkpoint(CheckpointStorage(str(checkpoint))) if f.severity == "error"]


def _restart_fails(spark, base: Path, match: str) -> None:
    # Spark refuses at start() or fails the query on its thread (awaitTermination raises).
    with pytest.raises((AssertionError, PySparkException), match=match):
        run_triggers(spark, _windowed_counts, base, 1)


def _repair_undone_as_before(spark, base: Path, match: str) -> None:
    """Repair with a backup, undo: byte for byte as before (a copy), and Spark refuses the restart as before."""
    before = base.parent / "before-repair"
    shutil.copytree(base, before, symlinks=True)
    storage, backup_dir = CheckpointStorage(str(base / "checkpoint")), "_ckptweb_backup/repair-undone"
    repair = plan_repair(storage, now=time.time(), quiet_seconds=0, backup_dir=backup_dir)
    assert repair.is_allowed() and not repair.is_empty, repair
    apply_repair(storage, repair)
    assert tree_differences(before, base) != [], "the repair changed nothing: the undo would prove nothing"
    undo = plan_undo(storage, backup_dir=backup_dir, now=time.time(), quiet_seconds=0)
    assert undo.is_allowed() and undo.writes, (undo.summary, undo.failed_preconditions())
    apply_undo(storage, undo)
    assert tree_differences(before, base) == []
    _restart_fails(spark, base, match)


def _repair_then_restart(spark, base: Path, **parameters) -> None:
    checkpoint = base / "checkpoint"
    storage = CheckpointStorage(str(checkpoint))
    plan = plan_repair(storage, now=time.time(), quiet_seconds=0, **parameters)
    assert plan.is_allowed() and not plan.is_empty, plan
    apply_repair(storage, plan)
    assert _errors(checkpoint) == []
    before = last_committed_batch(base)
    run = run_triggers(spark, _windowed_counts, base, 1)
    assert run.batch_ids and run.last_batch is not None and run.last_batch >= (before or 0), (before, run)
    assert _errors(checkpoint) == []


def test_an_empty_latest_offsets_file_of_a_batch_killed_before_its_commit(spark, written, tmp_path):
    base, checkpoint, latest = _copy(written, tmp_path)
    _remove(checkpoint, f"commits/{latest}")
    _replace(checkpoint, f"offsets/{latest}", b"")

    _restart_fails(spark, base, "Incomplete log file")
    _repair_then_restart(spark, base)


def test_a_truncated_latest_commit_file(spark, written, tmp_path):
    base, checkpoint, latest = _copy(written, tmp_path)
    _replace(checkpoint, f"commits/{latest}", b'v1\n{"nextBatchWaterm')

    _restart_fails(spark, base, "Unexpected end-of-input")
    _repair_undone_as_before(spark, base, "Unexpected end-of-input")
    _repair_then_restart(spark, base)


def test_a_truncated_commit_of_the_batch_before_an_uncommitted_one_is_rebuilt(spark, written, tmp_path):
    # The next batch's offsets carry the watermark the commit held: the repair rewrites it.
    base, checkpoint, latest = _copy(written, tmp_path)
    original = (checkpoint / "commits" / str(latest - 1)).read_bytes()
    _remove(checkpoint, f"commits/{latest}")
    _replace(checkpoint, f"commits/{latest - 1}", b"v1\n{")

    _restart_fails(spark, base, "Unexpected end-of-input")
    _repair_then_restart(spark, base)
    assert (checkpoint / "commits" / str(latest - 1)).read_bytes() == original


def test_a_hole_before_the_latest_offsets_file(spark, written, tmp_path):
    base, checkpoint, latest = _copy(written, tmp_path)
    _remove(checkpoint, f"offsets/{latest - 1}")

    _restart_fails(spark, base, f"batch {latest - 1} doesn't exist")
    _repair_undone_as_before(spark, base, f"batch {latest - 1} doesn't exist")
    _repair_then_restart(spark, base)


def test_a_missing_metadata_file_with_the_query_id_known(spark, written, tmp_path):
    base, checkpoint, _ = _copy(written, tmp_path)
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    _remove(checkpoint, "metadata")

    _restart_fails(spark, base, "STREAMING_CHECKPOINT_MISSING_METADATA_FILE")
    _repair_then_restart(spark, base, query_id=query_id)
    assert query_id in (checkpoint / "metadata").read_text()


def test_temporary_files_of_a_killed_writer(spark, written, tmp_path):
    # Spark ignores them at restart; the repair removes them, and Spark still restarts.
    base, checkpoint, latest = _copy(written, tmp_path)
    an_hour_ago = time.time() - 3600
    for log in ("offsets", "commits"):
        leftover = checkpoint / log / TEMP_NAME.format(batch=latest + 1)
        leftover.write_bytes(b"v1\n")
        os.utime(leftover, (an_hour_ago, an_hour_ago))
    found = {f.code for f in check_checkpoint(CheckpointStorage(str(checkpoint)))}
    assert "temporary-file" in found

    _repair_then_restart(spark, base, damage="temporary-file")
    assert not list((checkpoint / "offsets").glob("*.tmp")) and not list((checkpoint / "commits").glob("*.tmp"))
