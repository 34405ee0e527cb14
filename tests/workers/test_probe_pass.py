"""Between full walks, the probe follows what a state store's maintenance does (workers.probe_pass):
a snapshot written after the walk and the oldest version deleted reach the partition's figures
with no walk, equal to what a full walk then finds. The files are Spark's (fixtures PySpark wrote);
the maintenance is placed deterministically: the newest snapshot is held back from the walk and
put back, and the oldest version's files deleted, as Spark's cleanup deletes them."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboards.models import Checkpoint
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.state_partitions import VERSION_FIGURES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

FIGURES = (*VERSION_FIGURES, "rows", "rows_version")
LOG_FIGURES = ("latest_batch_id", "live_entries", "latest_compact_bytes")
# fixture -> (the newest snapshot's name, the version whose files go, the version oldest after).
STORES = {
    "file_source_dedup": ("16.snapshot", 12, 13),
    "rocksdb_changelog_agg": ("12.zip", 10, 11),
}


def _figures(checkpoint: Checkpoint, partition: int = 0) -> tuple:
    return checkpoint.state_partitions.filter(partition=partition).values_list(*FIGURES).get()


@pytest.mark.parametrize("fixture", sorted(STORES))
def test_a_snapshot_written_and_a_version_deleted_after_the_walk_are_probed_and_equal_a_walk(
    fixture, copy_checkpoint, state_keys_dir
):
    snapshot, deleted, oldest_after = STORES[fixture]
    base = copy_checkpoint(OUR_FIXTURES / fixture)
    store = base / "checkpoint" / "state" / "0" / "0"
    shutil.move(store / snapshot, base / snapshot)
    checkpoint = make_checkpoint(url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    walked_at = checkpoint.last_inspected_at
    shutil.move(base / snapshot, store / snapshot)
    for path in [*store.glob(f"{deleted}.*"), *store.glob(f".{deleted}.*")]:
        path.unlink()

    run = sync_checkpoint(checkpoint.pk, now=timezone.now() + timedelta(hours=1))

    checkpoint.refresh_from_db()
    assert (run.message, checkpoint.last_inspected_at) == ("", walked_at)
    probed = _figures(checkpoint)
    latest, earliest, snapshot_version = probed[:3]
    assert (earliest, snapshot_version) == (oldest_after, int(snapshot.split(".")[0])), probed
    Checkpoint.objects.filter(pk=checkpoint.pk).update(full_walk_requested_at=timezone.now())
    sync_checkpoint(checkpoint.pk, now=timezone.now() + timedelta(hours=1, seconds=1))
    assert _figures(checkpoint) == probed


def _source_log(checkpoint: Checkpoint) -> tuple:
    return checkpoint.metadata_logs.filter(path="sources/0").values_list(*LOG_FIGURES).get()


def test_a_log_compacted_past_its_known_latest_batch_makes_the_probe_walk_in_full(copy_checkpoint, state_keys_dir):
    """The sync was away for longer than Spark's cleanup delay: the file after the known latest
    batch and the known latest one are deleted, a compaction covers them. Probing the next name
    finds nothing; the probe must not take that for "no new batch"."""
    base = copy_checkpoint(OUR_FIXTURES / "file_source_dedup")
    log = base / "checkpoint" / "sources" / "0"
    later = ("4", "5.compact", "6", "7")
    for name in later:
        shutil.move(log / name, base / name)
    checkpoint = make_checkpoint(url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert _source_log(checkpoint)[0] == 3, "the walk saw the log up to batch 3"
    walked_at = checkpoint.last_inspected_at
    for name in later[1:]:
        shutil.move(base / name, log / name)
    for path in [*log.glob("2.compact"), *log.glob("[34]"), *log.glob(".2.compact.crc"), *log.glob(".[34].crc")]:
        path.unlink()

    run = sync_checkpoint(checkpoint.pk, now=timezone.now() + timedelta(hours=1))

    checkpoint.refresh_from_db()
    assert run.status == run.Status.OK, run.message
    assert checkpoint.last_inspected_at > walked_at, (
        "no full walk: the probe took a log compacted past it for one with nothing new"
    )
    probed = _source_log(checkpoint)
    assert probed[0] == 7, probed
    Checkpoint.objects.filter(pk=checkpoint.pk).update(full_walk_requested_at=timezone.now())
    sync_checkpoint(checkpoint.pk, now=timezone.now() + timedelta(hours=1, seconds=1))
    assert _source_log(checkpoint) == probed
