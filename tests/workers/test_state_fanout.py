"""State rows counted in chunks by workers (workers.state_fanout) against the one-pass count.

The one-pass count is checked against Spark's own state reader in tests/spark; here the chunks
must reproduce it partition by partition, join exactly once, and survive redelivery, a newer
scan and a partition that disappears.
"""

from __future__ import annotations

import shutil

import pytest

from bench.checkpoint_history import TEMPLATE_CHECKPOINT as WINDOWED_AGG
from bench.checkpoint_history import write_state_partitions
from dashboards.models import StatePartition, StateScan, StateScanChunk
from factories import make_checkpoint
from workers import tasks
from workers.state_fanout import chunks_to_count, count_state_chunk, partition_chunks
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db


def _rows_by_partition(checkpoint) -> dict[tuple[int, int, str], tuple]:
    return {
        (row.operator, row.partition, row.store): (row.rows, row.rows_version, row.bytes_on_disk, row.delta_chain)
        for row in StatePartition.objects.filter(checkpoint=checkpoint)
    }


@pytest.fixture
def wide_checkpoint(copy_checkpoint):
    def make(name: str, partitions: int):
        directory = copy_checkpoint(WINDOWED_AGG, name)
        return make_checkpoint(name=name, url=str(directory)), write_state_partitions(directory, partitions)

    return make


def test_chunks_count_the_same_rows_as_one_pass_and_join_once(wide_checkpoint, settings, eager_celery):
    settings.STATE_FANOUT_PARTITIONS = 0
    one_pass, sources = wide_checkpoint("one-pass", 12)
    sync_checkpoint(one_pass.pk)
    expected = _rows_by_partition(one_pass)
    assert len(expected) == 12 and all(rows is not None for rows, *_ in expected.values())
    assert not StateScan.objects.filter(checkpoint=one_pass).exists()

    settings.STATE_FANOUT_PARTITIONS, settings.STATE_FANOUT_CHUNK_PARTITIONS = 4, 5
    fanned, _ = wide_checkpoint("fanned-out", 12)
    tasks.sync_checkpoint(fanned.pk)  # the task shell queues the chunks, which eager Celery runs here

    scan = StateScan.objects.get(checkpoint=fanned)
    assert (scan.partitions, scan.chunks, scan.chunks_done, scan.error_count) == (12, 3, 3, 0)
    assert scan.finished_at is not None and scan.list_calls >= 12 and scan.read_calls > 0
    assert _rows_by_partition(fanned) == expected
    # Copies of one Spark-written partition hold its rows.
    rows = {partition: figures[0] for (_, partition, _), figures in expected.items()}
    assert all(rows[partition] == rows[source] for partition, source in sources.items())


def test_a_full_pass_keeps_the_last_counts_until_the_chunks_have_counted_again(wide_checkpoint, settings):
    settings.STATE_FANOUT_PARTITIONS = 0
    checkpoint, _ = wide_checkpoint("kept", 6)
    sync_checkpoint(checkpoint.pk)
    counted = _rows_by_partition(checkpoint)

    settings.STATE_FANOUT_PARTITIONS, settings.FULL_WALK_INTERVAL_SECONDS = 2, 0
    sync_checkpoint(checkpoint.pk)  # the plain sync queues no chunk: its task shell does

    assert _rows_by_partition(checkpoint) == counted
    scan = StateScan.objects.get(checkpoint=checkpoint)
    assert (scan.chunks_done, scan.finished_at) == (0, None)


def test_the_task_shell_queues_the_uncounted_chunks_of_the_scan_its_own_sync_started(wide_checkpoint, settings):
    settings.STATE_FANOUT_PARTITIONS, settings.STATE_FANOUT_CHUNK_PARTITIONS, settings.FULL_WALK_INTERVAL_SECONDS = (
        2,
        2,
        0,
    )
    checkpoint, _ = wide_checkpoint("own-chunks", 4)
    first_run, second_run = sync_checkpoint(checkpoint.pk), sync_checkpoint(checkpoint.pk)
    older, newer = StateScan.objects.filter(checkpoint=checkpoint).order_by("started_at")
    older_chunks, newer_chunks = ([chunk.pk for chunk in scan.chunk_rows.order_by("index")] for scan in (older, newer))

    count_state_chunk(newer_chunks[0])

    assert chunks_to_count(first_run) == older_chunks and len(older_chunks) == 2
    assert chunks_to_count(second_run) == newer_chunks[1:]
    settings.FULL_WALK_INTERVAL_SECONDS = 3600
    assert chunks_to_count(sync_checkpoint(checkpoint.pk)) == []  # a probe starts no scan


def test_a_redelivered_chunk_counts_once(wide_checkpoint, settings):
    settings.STATE_FANOUT_PARTITIONS, settings.STATE_FANOUT_CHUNK_PARTITIONS = 2, 2
    checkpoint, _ = wide_checkpoint("redelivered", 4)
    sync_checkpoint(checkpoint.pk)
    first, second = StateScanChunk.objects.filter(scan__checkpoint=checkpoint).order_by("index")

    count_state_chunk(first.pk)
    calls = StateScan.objects.get(checkpoint=checkpoint).list_calls
    count_state_chunk(first.pk)

    scan = StateScan.objects.get(checkpoint=checkpoint)
    assert (scan.chunks_done, scan.finished_at, scan.list_calls) == (1, None, calls)
    count_state_chunk(second.pk)
    scan.refresh_from_db()
    assert scan.chunks_done == 2 and scan.finished_at is not None


def test_a_chunk_of_a_superseded_scan_reads_nothing(wide_checkpoint, settings):
    settings.STATE_FANOUT_PARTITIONS, settings.FULL_WALK_INTERVAL_SECONDS = 2, 0
    checkpoint, _ = wide_checkpoint("superseded", 4)
    sync_checkpoint(checkpoint.pk)
    sync_checkpoint(checkpoint.pk)
    older, newer = StateScan.objects.filter(checkpoint=checkpoint).order_by("started_at")

    for chunk in older.chunk_rows.all():
        count_state_chunk(chunk.pk)

    older.refresh_from_db()
    assert (older.chunks_done, older.read_calls, older.list_calls) == (older.chunks, 0, 0)
    assert StatePartition.objects.filter(checkpoint=checkpoint, rows__isnull=False).count() == 0
    for chunk in newer.chunk_rows.all():
        count_state_chunk(chunk.pk)
    assert StatePartition.objects.filter(checkpoint=checkpoint, rows__isnull=False).count() == 4


def test_a_partition_deleted_before_its_chunk_runs_is_skipped(wide_checkpoint, settings):
    settings.STATE_FANOUT_PARTITIONS, settings.STATE_FANOUT_CHUNK_PARTITIONS = 2, 3
    checkpoint, _ = wide_checkpoint("vanished", 3)
    sync_checkpoint(checkpoint.pk)
    shutil.rmtree(f"{checkpoint.url}/state/0/1")

    (chunk,) = StateScanChunk.objects.filter(scan__checkpoint=checkpoint)
    count_state_chunk(chunk.pk)

    counted = set(
        StatePartition.objects.filter(checkpoint=checkpoint, rows__isnull=False).values_list("partition", flat=True)
    )
    assert counted == {0, 2}
    assert StateScan.objects.get(checkpoint=checkpoint).finished_at is not None


@pytest.mark.parametrize(
    ("partitions", "size", "expected"), [(0, 3, []), (5, 2, [[[0, 0], [0, 1]], [[0, 2], [0, 3]], [[0, 4]]])]
)
def test_partitions_are_cut_into_ordered_chunks_without_repeats(partitions, size, expected):
    class Summary:
        def __init__(self, partition, store):
            self.operator, self.partition, self.store = 0, partition, store

    # Two stores of one partition (a join) are one pair.
    summaries = [Summary(p, store) for p in reversed(range(partitions)) for store in ("left", "right")]
    assert partition_chunks(summaries, size) == expected


def test_the_query_page_shows_the_scan_s_progress(wide_checkpoint, settings, viewer_client):
    from django.urls import reverse

    settings.STATE_FANOUT_PARTITIONS, settings.STATE_FANOUT_CHUNK_PARTITIONS = 2, 2
    checkpoint, _ = wide_checkpoint("shown", 4)
    sync_checkpoint(checkpoint.pk)
    first = StateScanChunk.objects.filter(scan__checkpoint=checkpoint).order_by("index").first()
    count_state_chunk(first.pk)

    page = viewer_client.get(reverse("dashboards:checkpoint-detail", args=[checkpoint.pk])).content.decode()

    assert 'id="state-scan"' in page and "1 of 2 chunks done" in page
