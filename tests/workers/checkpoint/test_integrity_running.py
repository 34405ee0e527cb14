"""An inspection taken while a batch runs: copies of Spark-written checkpoints cut back to that moment.

Spark writes offsets/N when it plans batch N, each task then writes its partition's state
version N + 1, and commits/N comes last (MicroBatchExecution). Cutting a real checkpoint back to
a moment inside a batch gives exactly what a listing taken then sees.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.integrity.checks import run_checks
from workers.checkpoint.integrity.gather import check_checkpoint, gather_facts
from workers.checkpoint.integrity.running import hold_back_running_batch
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

# Offsets and commits 0 and 1, five state partitions with 1.delta and 2.delta (Spark 3.2).
DEDUP_32 = SPARK_TEST_RESOURCES / "checkpoint-version-3.2.0-deduplication-with-repartition"
WINDOWED = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    return target


def _remove(root: Path, *relpaths: str) -> None:
    """Delete files (and their Hadoop checksums) or whole directories."""
    for relpath in relpaths:
        path = root / relpath
        if path.is_dir():
            shutil.rmtree(path)
            continue
        path.unlink()
        (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def _inside_batch_0(root: Path) -> None:
    """Batch 0 planned; the tasks of partitions 0 and 1 have written version 1, 2 to 4 not yet."""
    _remove(root, "offsets/1", "commits/0", "commits/1", "state/0/2", "state/0/3", "state/0/4")
    _remove(root, "state/0/0/2.delta", "state/0/1/2.delta")


def _inside_batch_1(root: Path) -> None:
    """Batch 1 planned; the tasks of partitions 0 and 1 have written version 2, 2 to 4 not yet."""
    _remove(root, "commits/1", "state/0/2/2.delta", "state/0/3/2.delta", "state/0/4/2.delta")


@pytest.mark.parametrize(
    ("moment", "running"), [(_inside_batch_0, 0), (_inside_batch_1, 1)], ids=["batch 0", "batch 1"]
)
def test_an_inspection_taken_while_a_batch_runs_finds_no_damage(tmp_path, moment, running):
    root = _copy(DEDUP_32, tmp_path / "checkpoint")
    moment(root)

    found = {(f.severity, f.code, f.path) for f in check_checkpoint(CheckpointStorage(str(root)))}

    # A restart re-runs the batch from the state its predecessor committed (version 0: empty).
    assert found == {("info", "batch-uncommitted", f"offsets/{running}")}


class _BatchEndsDuringTheWalk(CheckpointStorage):
    """A checkpoint whose batch 0 ends (Spark writes the rest of its state, then its commit)
    right after the walk has listed the operator's partitions (``state/0``)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.listed: list[str] = []

    def list_dir(self, relpath: str = ""):
        entries = super().list_dir(relpath)
        self.listed.append(relpath)
        if relpath == "state/0":
            root = Path(self.url.removeprefix("file://"))
            for partition in (2, 3, 4):
                (root / f"state/0/{partition}").mkdir()
                shutil.copyfile(DEDUP_32 / f"state/0/{partition}/1.delta", root / f"state/0/{partition}/1.delta")
            shutil.copyfile(DEDUP_32 / "commits/0", root / "commits/0")
        return entries


def test_a_batch_that_ends_while_the_walk_runs_is_seen_whole_or_not_at_all(tmp_path):
    root = _copy(DEDUP_32, tmp_path / "checkpoint")
    _inside_batch_0(root)
    storage = _BatchEndsDuringTheWalk(str(root))

    found = {(f.severity, f.code, f.path) for f in check_checkpoint(storage)}

    # commits/ was listed before the batch ended: it still runs, as far as this walk knows.
    assert found == {("info", "batch-uncommitted", "offsets/0")}
    assert storage.listed[:3] == ["", "commits", "offsets"]


@pytest.fixture
def newest_uncommitted(tmp_path):
    """The windowed aggregation's checkpoint as it stood while batch 11 ran (its commit not yet written)."""
    root = _copy(WINDOWED, tmp_path / "checkpoint")
    _remove(root, "commits/11")
    facts = gather_facts(CheckpointStorage(str(root)))
    planned_at = facts.value_of("offsets/11").metadata.batch_timestamp_ms / 1000
    return facts, planned_at


def test_the_newest_batch_is_not_reported_uncommitted_while_younger_than_its_overdue_time(newest_uncommitted):
    facts, planned_at = newest_uncommitted

    young = hold_back_running_batch(run_checks(facts), facts, now=planned_at + 119, overdue_after_seconds=120)
    overdue = hold_back_running_batch(run_checks(facts), facts, now=planned_at + 121, overdue_after_seconds=120)

    assert [f.code for f in young] == []
    assert [(f.severity, f.code, f.path) for f in overdue] == [("info", "batch-uncommitted", "offsets/11")]


def test_several_uncommitted_batches_wait_for_the_newest_of_them(newest_uncommitted, tmp_path):
    root = tmp_path / "checkpoint"
    _remove(root, "commits/10")
    facts = gather_facts(CheckpointStorage(str(root)))
    _, planned_at = newest_uncommitted

    young = hold_back_running_batch(run_checks(facts), facts, now=planned_at + 1, overdue_after_seconds=120)
    overdue = hold_back_running_batch(run_checks(facts), facts, now=planned_at + 600, overdue_after_seconds=120)

    assert young == []
    assert [(f.severity, f.code, f.path) for f in overdue] == [("warning", "uncommitted-batches", "offsets/10")]


def test_damage_is_never_held_back_while_the_newest_batch_runs(newest_uncommitted, tmp_path):
    root = tmp_path / "checkpoint"
    _remove(root, "state/0/1")  # the version batch 11 loads is gone from partition 1
    facts = gather_facts(CheckpointStorage(str(root)))
    _, planned_at = newest_uncommitted

    held = hold_back_running_batch(run_checks(facts), facts, now=planned_at + 1, overdue_after_seconds=120)

    assert [(f.severity, f.code, f.path) for f in held] == [("error", "state-partition-missing", "state/0/1")]
