"""Incremental sync: probes of the next names cost what is new, reconciles catch the rest.

Histories are written by bench/checkpoint_history.py from the newest entries of a PySpark-written
fixture, so every file is one Spark wrote (under a new batch id).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from bench.checkpoint_history import purge_batches, read_template, write_batches
from dashboards.models import Batch, Checkpoint, SyncRun
from factories import make_checkpoint
from workers import sync
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(checkpoint_roots):
    """Return a function writing a checkpoint of N committed batches and registering it."""
    template = read_template()

    def make(name: str, batches: int) -> tuple[Checkpoint, object]:
        directory = checkpoint_roots / name
        write_batches(directory, range(batches), template)
        return make_checkpoint(name=name, url=str(directory)), directory

    return make


def _calls(run: SyncRun) -> tuple[str, int, int, int]:
    return (run.kind, run.list_calls, run.info_calls, run.read_calls)


def _sync_ten_new_batches(checkpoint: Checkpoint, directory, batches: int) -> SyncRun:
    sync_checkpoint(checkpoint.pk)
    write_batches(directory, range(batches, batches + 10), read_template())
    return sync_checkpoint(checkpoint.pk)


def test_ten_new_batches_cost_the_same_storage_calls_on_a_short_and_a_long_history(history):
    short = _sync_ten_new_batches(*history("short", 100), 100)
    long = _sync_ten_new_batches(*history("long", 3000), 3000)

    # 10 offsets found + 1 missing (the end), 10 commits; no listing, whatever the history.
    assert _calls(short) == _calls(long) == (SyncRun.Kind.PROBE, 0, 0, 21)
    assert (long.new_batches, long.new_commits) == (10, 10)
    assert Checkpoint.objects.get(name="long").batches.count() == 3010


def test_the_first_sync_is_a_reconcile_that_lists_both_logs(history):
    checkpoint, _ = history("fresh", 20)
    # Leave the full walk (its own listings, every FULL_WALK_INTERVAL_SECONDS) out of the count.
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=timezone.now())

    run = sync_checkpoint(checkpoint.pk)

    # metadata, then 20 offsets and 20 commits after listing offsets/ and commits/.
    assert _calls(run) == (SyncRun.Kind.RECONCILE, 2, 0, 41)
    checkpoint.refresh_from_db()
    assert (checkpoint.latest_batch_id, checkpoint.earliest_stored_batch_id) == (19, 0)
    assert checkpoint.last_reconciled_at == run.started_at


def test_a_reconcile_runs_again_once_the_interval_has_passed(history, settings):
    checkpoint, _ = history("periodic", 5)
    first = sync_checkpoint(checkpoint.pk)
    settings.RECONCILE_INTERVAL_SECONDS = 60

    probe = sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=59))
    reconcile = sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=60))

    assert (probe.kind, reconcile.kind) == (SyncRun.Kind.PROBE, SyncRun.Kind.RECONCILE)


def test_a_purge_by_spark_is_noticed_by_the_reconcile_and_the_rows_are_kept(history, settings):
    checkpoint, directory = history("purged", 50)
    sync_checkpoint(checkpoint.pk)
    purge_batches(directory, below=40)
    write_batches(directory, range(50, 52), read_template())

    probe = sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert (probe.kind, checkpoint.earliest_stored_batch_id) == (SyncRun.Kind.PROBE, 0)
    settings.RECONCILE_INTERVAL_SECONDS = 0
    reconcile = sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert (reconcile.kind, checkpoint.earliest_stored_batch_id) == (SyncRun.Kind.RECONCILE, 40)
    assert checkpoint.batches.count() == 52


def test_a_probe_that_fell_behind_sparks_log_purge_lists_once_and_stores_what_is_there_now(history):
    checkpoint, directory = history("outage", 10)
    first = sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    alive_at = checkpoint.latest_batch_at + timedelta(seconds=1)
    sync_checkpoint(checkpoint.pk, now=alive_at)  # the query is seen alive, its newest batch just planned
    # A worker outage: the query runs 20 batches and, keeping 2 (minBatchesToRetain=2), Spark
    # deletes offsets/10, the name the next probe asks for, and offsets/9, the newest stored.
    write_batches(directory, range(10, 30), read_template())
    purge_batches(directory, below=28)

    run = sync_checkpoint(checkpoint.pk, now=alive_at + timedelta(minutes=10))

    # offsets/10 (missing), offsets/9 looked up (gone), offsets/ and commits/ listed, then
    # offsets/28, offsets/29 and their commits read.
    assert first.kind == SyncRun.Kind.RECONCILE
    assert _calls(run) == (SyncRun.Kind.RECONCILE, 2, 1, 5)
    assert (run.new_batches, run.new_commits) == (2, 2)
    checkpoint.refresh_from_db()
    assert (checkpoint.latest_batch_id, checkpoint.latest_committed_batch_id) == (29, 29)
    assert checkpoint.earliest_stored_batch_id == 28
    assert list(checkpoint.batches.values_list("batch_id", flat=True).order_by("batch_id")) == [*range(10), 28, 29]


def test_a_probe_that_finds_nothing_new_looks_for_a_purge_only_when_the_query_should_have_moved(history):
    checkpoint, directory = history("quiet", 10)
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    alive_at = checkpoint.latest_batch_at + timedelta(seconds=1)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(expected_trigger_seconds=60)  # a batch a minute
    sync_checkpoint(checkpoint.pk, now=alive_at)

    runs = [
        sync_checkpoint(checkpoint.pk, now=alive_at + timedelta(seconds=30)),  # no batch due yet
        sync_checkpoint(checkpoint.pk, now=alive_at + timedelta(minutes=3)),  # two batches due
        sync_checkpoint(checkpoint.pk, now=alive_at + timedelta(hours=1)),  # the previous sync saw it alive
        sync_checkpoint(checkpoint.pk, now=alive_at + timedelta(hours=2)),  # the previous sync saw it stopped
    ]

    # offsets/10 read (missing: nothing new), and offsets/9 looked up (there: nothing was purged)
    # only while batches were due.
    assert [_calls(run) for run in runs] == [
        (SyncRun.Kind.PROBE, 0, 0, 1),
        (SyncRun.Kind.PROBE, 0, 1, 1),
        (SyncRun.Kind.PROBE, 0, 1, 1),
        (SyncRun.Kind.PROBE, 0, 0, 1),
    ]


def test_a_file_written_behind_a_gap_is_found_by_the_reconcile_only(history, settings):
    checkpoint, directory = history("gap", 10)
    sync_checkpoint(checkpoint.pk)
    write_batches(directory, range(11, 12), read_template())  # offsets/10 is not there (yet)

    sync_checkpoint(checkpoint.pk)
    assert not checkpoint.batches.filter(batch_id=11).exists()
    settings.RECONCILE_INTERVAL_SECONDS = 0
    run = sync_checkpoint(checkpoint.pk)

    assert run.kind == SyncRun.Kind.RECONCILE
    assert checkpoint.batches.filter(batch_id=11, is_committed=True).exists()
    checkpoint.refresh_from_db()
    assert checkpoint.latest_batch_id == 11


def test_a_probe_reads_at_most_the_probe_limit_and_catches_up_over_several_syncs(history, monkeypatch):
    checkpoint, directory = history("ahead", 3)
    sync_checkpoint(checkpoint.pk)
    write_batches(directory, range(3, 28), read_template())
    monkeypatch.setattr(sync, "PROBE_LIMIT", 10)

    runs = [sync_checkpoint(checkpoint.pk) for _ in range(3)]

    assert [run.new_batches for run in runs] == [10, 10, 5]
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True)) == list(range(28))


def test_a_late_commit_is_read_by_a_probe(history):
    checkpoint, directory = history("late", 4)
    write_batches(directory, range(4, 5), read_template(), committed=False)
    sync_checkpoint(checkpoint.pk)
    assert not checkpoint.batches.get(batch_id=4).is_committed
    (directory / "commits" / "4").write_bytes(read_template().commits)

    run = sync_checkpoint(checkpoint.pk)

    assert (run.kind, run.new_commits) == (SyncRun.Kind.PROBE, 1)
    assert checkpoint.batches.get(batch_id=4).is_committed
    checkpoint.refresh_from_db()
    assert (checkpoint.uncommitted_batch_count, checkpoint.latest_committed_batch_id) == (0, 4)


def test_a_probe_counts_new_uncommitted_batches_as_a_recount_would(history):
    checkpoint, directory = history("pending", 2)
    sync_checkpoint(checkpoint.pk)
    write_batches(directory, range(2, 5), read_template(), committed=False)
    (directory / "commits" / "2").write_bytes(read_template().commits)

    sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert (checkpoint.latest_batch_id, checkpoint.latest_committed_batch_id) == (4, 2)
    assert checkpoint.uncommitted_batch_count == checkpoint.batches.filter(is_committed=False).count() == 2


def test_a_corrupt_file_met_by_a_probe_is_read_again_until_it_reads_fine(history):
    checkpoint, directory = history("corrupt", 3)
    sync_checkpoint(checkpoint.pk)
    write_batches(directory, range(3, 5), read_template())
    (directory / "offsets" / "3").write_bytes(b"v1\n{not json")

    first = sync_checkpoint(checkpoint.pk)
    assert first.status == SyncRun.Status.PARTIAL
    assert checkpoint.issues.open().get().path == "offsets/3"
    (directory / "offsets" / "3").write_bytes(read_template().offsets)
    second = sync_checkpoint(checkpoint.pk)

    assert (second.kind, second.status) == (SyncRun.Kind.PROBE, SyncRun.Status.OK)
    assert not checkpoint.issues.open().exists()
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True)) == [0, 1, 2, 3, 4]


def test_the_checkpoint_page_shows_each_syncs_kind_and_call_counts(history, viewer_client):
    checkpoint, directory = history("shown", 3)
    sync_checkpoint(checkpoint.pk)
    write_batches(directory, range(3, 5), read_template())
    sync_checkpoint(checkpoint.pk)

    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()

    table = page[page.index('id="sync-runs"') :]
    assert "probe of the next names" in table and "full listing" in table
    # The probe's row: kind, 2 new batches, 2 new commits, 0 LIST, 0 INFO, 5 reads.
    assert "<td>probe of the next names</td><td>2</td><td>2</td><td>0</td><td>0</td><td>5</td>" in table


def test_a_long_reconcile_stores_its_batches_in_chunks_and_loses_none(history, monkeypatch):
    monkeypatch.setattr(sync, "RECONCILE_CHUNK_BATCHES", 4)
    checkpoint, directory = history("chunked", 10)
    write_batches(directory, range(10, 13), read_template(), committed=False)
    stored_per_chunk = []
    store_chunk = sync._store_chunk
    monkeypatch.setattr(
        sync, "_store_chunk", lambda *args: (store_chunk(*args), stored_per_chunk.append(Batch.objects.count()))
    )

    run = sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert stored_per_chunk == [4, 8, 12]  # 13 new batches: three full chunks before the last one
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", "is_committed")) == [
        (batch_id, batch_id < 10) for batch_id in range(13)
    ]
    assert (run.status, run.new_batches, run.new_commits) == (SyncRun.Status.OK, 13, 10)
    assert (checkpoint.latest_batch_id, checkpoint.latest_committed_batch_id, checkpoint.uncommitted_batch_count) == (
        12,
        9,
        3,
    )


def test_a_reconcile_that_fails_after_some_chunks_is_finished_by_the_next_sync(history, monkeypatch):
    monkeypatch.setattr(sync, "RECONCILE_CHUNK_BATCHES", 4)
    checkpoint, directory = history("interrupted", 10)
    store_chunk, chunks = sync._store_chunk, []

    def fail_on_second_chunk(*args):
        chunks.append(1)
        if len(chunks) == 2:
            raise RuntimeError("the database went away")
        store_chunk(*args)

    monkeypatch.setattr(sync, "_store_chunk", fail_on_second_chunk)
    with pytest.raises(RuntimeError):
        sync_checkpoint(checkpoint.pk)
    assert Batch.objects.count() == 4
    monkeypatch.setattr(sync, "_store_chunk", store_chunk)

    run = sync_checkpoint(checkpoint.pk)

    assert run.kind == SyncRun.Kind.RECONCILE and run.new_batches == 6
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True)) == list(range(10))
    assert checkpoint.batches.uncommitted().count() == 0
