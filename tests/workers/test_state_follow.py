"""A sync that stores newly committed batches moves the state figures to the version they committed.

Copies of Spark-written fixtures have their last commits held back, then given back one at a
time, as a running query writes them. After each, the followed figures must equal what a full
pass (the listing and cold read of every partition, itself checked against Spark's `statestore`
source in tests/spark) finds for the same files; and once a partition's key set is kept, a sync
that follows one new batch reads only that version's files.
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse

from dashboards.models import Checkpoint, StatePartition, SyncRun
from factories import make_checkpoint, planned_at
from fixture_paths import OUR_FIXTURES
from workers.checkpoint.statekeys import parse_state_keys, state_keys_of
from workers.state_follow import keys_folder, keys_path, save_state_keys
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

FIGURES = (
    "operator",
    "partition",
    "store",
    "provider",
    "latest_version",
    "snapshot_version",
    "delta_chain",
    "load_files",
    "load_bytes",
    "bytes_on_disk",
    "rows",
    "rows_version",
    "note",
)
# The fixtures' newest batches are 8 to 11; the state versions they commit are 9 to 12.
HELD_BACK = (10, 11)
FOLLOWED_FIXTURES = (
    "windowed_agg_file_sink",
    "rocksdb_changelog_agg",
    "rocksdb_checkpoint_v2_dedup",
    "stream_stream_join",
)


@pytest.fixture
def held_back(copy_checkpoint, settings, tmp_path):
    """Return a function copying a fixture without its last commits, registered and synced once."""
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"

    def make(name: str, *, with_state_files: bool = False) -> tuple[Checkpoint, Path, Path]:
        root = copy_checkpoint(OUR_FIXTURES / name / "checkpoint", name)
        aside = root.parent / f"{name}-held-commits"
        aside.mkdir()
        for batch_id in HELD_BACK:
            shutil.move(root / "commits" / str(batch_id), aside / str(batch_id))
            if with_state_files:  # the state files the batch wrote, as if it had not run yet
                for path in root.glob(f"state/*/*/{batch_id + 1}.*"):
                    target = aside / "state" / path.relative_to(root / "state")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(path, target)
        checkpoint = make_checkpoint(name=name, url=str(root))
        # The first sync (a reconcile and a full pass, at version 10) while the query runs: just
        # after Spark planned batch 11, so that no finding waits for the commits given back.
        sync_checkpoint(checkpoint.pk, now=planned_at(root, HELD_BACK[-1]) + timedelta(seconds=1))
        return checkpoint, root, aside

    return make


def _give_back(checkpoint: Checkpoint, root: Path, aside: Path, batch_id: int) -> SyncRun:
    """Put a held-back commit (and its state files) in place and sync, later than the first sync
    but before the next full pass."""
    for path in (aside / "state").glob(f"*/*/{batch_id + 1}.*"):
        shutil.move(path, root / "state" / path.relative_to(aside / "state"))
    shutil.move(aside / str(batch_id), root / "commits" / str(batch_id))
    first = checkpoint.sync_runs.order_by("started_at").first().started_at
    return sync_checkpoint(checkpoint.pk, now=first + timedelta(seconds=batch_id))


def _figures(checkpoint: Checkpoint) -> list[tuple]:
    return list(checkpoint.state_partitions.order_by("operator", "partition", "store").values_list(*FIGURES))


def _full_pass_figures(checkpoint: Checkpoint) -> list[tuple]:
    """What a full pass finds now (the next sync, with the pass made due)."""
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=None)
    sync_checkpoint(checkpoint.pk)
    return _figures(checkpoint)


@pytest.mark.parametrize("name", FOLLOWED_FIXTURES)
def test_each_new_commit_moves_the_state_figures_to_what_a_full_pass_finds(held_back, name):
    checkpoint, root, aside = held_back(name)
    assert {row[-2] for row in _figures(checkpoint)} == {10}

    followed = []
    for batch_id in HELD_BACK:
        run = _give_back(checkpoint, root, aside, batch_id)
        assert run.kind == SyncRun.Kind.PROBE and run.new_commits == 1
        followed.append(_figures(checkpoint))

    assert {row[-2] for row in followed[0]} == {11}
    assert {row[-2] for row in followed[1]} == {12}
    assert all(row[-1] == "" for row in followed[1])
    assert followed[1] == _full_pass_figures(checkpoint)


def test_the_partition_page_says_which_batch_and_version_the_followed_figures_are_of(held_back, viewer_client):
    checkpoint, root, aside = held_back("rocksdb_changelog_agg")
    _give_back(checkpoint, root, aside, 10)
    row = checkpoint.state_partitions.get(partition=0)

    page = viewer_client.get(reverse("dashboards:state-partition", args=[checkpoint.pk, row.pk])).content.decode()

    assert "As of batch 10 (state version 11)" in page


def test_new_deltas_and_snapshots_move_the_versions_delta_chain_restart_load_and_bytes(held_back):
    checkpoint, root, aside = held_back("windowed_agg_file_sink", with_state_files=True)
    # Without 11.* and 12.*: version 10 is the newest, loaded as 9.snapshot + 10.delta.
    assert {row[4:8] for row in _figures(checkpoint)} == {(10, 9, 1, 2)}

    _give_back(checkpoint, root, aside, 10)
    assert {row[4:8] for row in _figures(checkpoint)} == {(11, 9, 2, 3)}
    _give_back(checkpoint, root, aside, 11)  # 12.delta and 12.snapshot

    assert {row[4:8] for row in _figures(checkpoint)} == {(12, 12, 0, 1)}
    assert _figures(checkpoint) == _full_pass_figures(checkpoint)


@pytest.mark.parametrize(
    ("name", "changes", "snapshots"),
    [
        ("windowed_agg_file_sink", "12.delta", "12.snapshot"),
        ("rocksdb_changelog_agg", "12.changelog", "12.zip"),
    ],
)
def test_a_sync_that_follows_one_new_batch_reads_only_that_versions_files(held_back, name, changes, snapshots):
    checkpoint, root, aside = held_back(name)
    _give_back(checkpoint, root, aside, 10)  # the first follow reads cold and keeps the key sets
    partitions = checkpoint.state_partitions.count()

    run = _give_back(checkpoint, root, aside, 11)

    # offsets/12 (missing: the end of the probe) and commits/11, then per partition the
    # new version's delta or changelog read and its snapshot or zip looked up: no listing.
    assert (run.list_calls, run.read_calls, run.info_calls) == (0, 2 + partitions, partitions)
    assert set(checkpoint.state_partitions.values_list("rows_version", flat=True)) == {12}
    assert (root / "state/0/0" / changes).exists() and (root / "state/0/0" / snapshots).exists()


def test_a_missing_key_set_file_is_rebuilt_from_storage(held_back):
    checkpoint, root, aside = held_back("windowed_agg_file_sink")
    _give_back(checkpoint, root, aside, 10)
    row = checkpoint.state_partitions.get(partition=0)
    keys_path(checkpoint, row).unlink()

    run = _give_back(checkpoint, root, aside, 11)

    assert run.list_calls > 0  # the cold read lists the partition
    kept = parse_state_keys(keys_path(checkpoint, row).read_bytes(), source="kept")
    row.refresh_from_db()
    assert (kept.version, kept.rows) == (12, row.rows) and row.rows_version == 12
    assert _figures(checkpoint) == _full_pass_figures(checkpoint)


@pytest.mark.parametrize("damage", ["stale", "unreadable"])
def test_a_stale_or_unreadable_key_set_file_is_rebuilt_from_storage(held_back, damage):
    checkpoint, root, aside = held_back("rocksdb_changelog_agg")
    _give_back(checkpoint, root, aside, 10)
    row = checkpoint.state_partitions.get(partition=1)
    path = keys_path(checkpoint, row)
    if damage == "stale":  # of the right version, but not the rows the partition had then
        save_state_keys(path, state_keys_of([b"not a key of this store"], version=11))
    else:
        path.write_bytes(path.read_bytes()[:40])

    _give_back(checkpoint, root, aside, 11)

    row.refresh_from_db()
    assert parse_state_keys(path.read_bytes(), source="kept").rows == row.rows
    assert _figures(checkpoint) == _full_pass_figures(checkpoint)


def test_a_gap_in_the_delta_chain_is_read_cold_from_the_snapshot(held_back):
    checkpoint, root, aside = held_back("windowed_agg_file_sink")
    _give_back(checkpoint, root, aside, 10)
    for delta in root.glob("state/0/*/12.delta"):
        delta.unlink()  # version 12 now loads from 12.snapshot alone

    _give_back(checkpoint, root, aside, 11)

    rows = checkpoint.state_partitions.order_by("partition")
    assert [(row.rows_version, row.note) for row in rows] == [(12, "")] * rows.count()
    assert list(rows.values_list("rows", flat=True)) == [row[-3] for row in _full_pass_figures(checkpoint)]


def test_a_checkpoint_without_state_costs_no_storage_call_more(copy_checkpoint, settings, tmp_path):
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    root = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "stateless")
    shutil.rmtree(root / "state")
    aside = tmp_path / "aside"
    aside.mkdir()
    shutil.move(root / "commits" / "11", aside / "11")
    checkpoint = make_checkpoint(name="stateless", url=str(root))
    sync_checkpoint(checkpoint.pk, now=planned_at(root, 11) + timedelta(seconds=1))  # while batch 11 runs

    run = _give_back(checkpoint, root, aside, 11)

    assert (run.list_calls, run.read_calls, run.info_calls) == (0, 2, 0)
    assert not StatePartition.objects.filter(checkpoint=checkpoint).exists()
    assert not settings.STATE_KEYS_DIR.exists()


def test_the_hourly_prune_deletes_the_key_sets_of_deleted_checkpoints(held_back, settings):
    from workers.retention import prune_history

    checkpoint, root, aside = held_back("windowed_agg_file_sink")
    _give_back(checkpoint, root, aside, 10)
    gone = make_checkpoint(name="gone", url=f"{root}-gone")
    (keys_folder(gone) / "0" / "default").mkdir(parents=True)
    gone.delete()

    pruned = prune_history(checkpoint.sync_runs.first().started_at)

    assert pruned["state_key_sets"] == 1
    assert [p.name for p in settings.STATE_KEYS_DIR.iterdir()] == [keys_folder(checkpoint).name]
    assert keys_path(checkpoint, checkpoint.state_partitions.first()).exists()


def test_a_damaged_delta_leaves_a_note_naming_it_and_the_other_partitions_follow(held_back):
    checkpoint, root, aside = held_back("windowed_agg_file_sink")
    _give_back(checkpoint, root, aside, 10)
    damaged = root / "state/0/1/12.delta"
    damaged.write_bytes(damaged.read_bytes()[:30])

    run = _give_back(checkpoint, root, aside, 11)

    assert run.status == SyncRun.Status.OK
    first, second = checkpoint.state_partitions.order_by("partition")
    assert (first.rows_version, first.note) == (12, "")
    assert second.rows_version == 11
    assert second.note.startswith("not followed to version 12: state/0/1/12.delta: "), second.note
