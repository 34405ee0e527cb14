"""The batch timeline's roll-ups (dashboards/query_page/timeline_rollups.py): every stored bucket
equals the min/max of the checkpoint's timed batches it covers, and a timeline read from them keeps
the rows the reference downsampling of those batches keeps, after batches and commits arrive one
at a time through the sync (one behind the others too), after old batches are removed, and after
a checkpoint is synced again from scratch, and after a worker builds them for batches stored before
they existed; and the timeline of a million batches, timed or not, reads a bounded number of rows,
built or still to be built."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from dashboards.models import Batch, Checkpoint, TimelineRollup
from dashboards.query_page.chart_series import TIMELINE_SHAPE, BatchRange
from dashboards.query_page.downsample import downsample_rows
from dashboards.query_page.rollups import read_rolled
from dashboards.query_page.timeline_rollups import TIMELINE_SERIES, rebuild_timeline_rollups, timeline_series
from factories import make_checkpoint
from fixture_paths import SPARK_TEST_RESOURCES
from rollup_expectations import MOST_ROWS_READ, expected_rollups, rows_read_in_this_transaction, stored_rollups
from workers.rollup_builds import BUILT, BUSY, MORE, build_timeline_chunk, build_timeline_rollups
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

# Batches 0, 1, 2 and 4 (3 is missing), 4 uncommitted.
INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"
UNTIMED_BATCH = 40  # written with batchTimestampMs 0: no point, and the next one's interval skips it


def _write_offsets(directory: Path, batch_id: int, timestamp_ms: int, watermark_ms: int) -> None:
    """offsets/N as Spark writes it: batch 2's entry with this batch's timestamp and watermark."""
    version, metadata, *sources = (directory / "offsets" / "2").read_text().split("\n")
    fields = {**json.loads(metadata), "batchTimestampMs": timestamp_ms, "batchWatermarkMs": watermark_ms}
    (directory / "offsets" / str(batch_id)).write_text("\n".join([version, json.dumps(fields), *sources]))


def _write_commit(directory: Path, batch_id: int) -> None:
    (directory / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def _raw_rows(checkpoint: Checkpoint) -> list[dict]:
    """The timed batches as the timeline plots them, the interval from the timed batch before."""
    rows, previous_ms = [], None
    for batch in checkpoint.batches.order_by("batch_id"):
        if batch.timestamp_ms > 0:
            interval = None if previous_ms is None else batch.timestamp_ms - previous_ms
            rows.append(
                {
                    "batch_id": batch.batch_id,
                    "timestamp_ms": batch.timestamp_ms,
                    "watermark_ms": batch.watermark_ms,
                    "interval_ms": interval,
                    "committed_flag": int(batch.is_committed),
                }
            )
            previous_ms = batch.timestamp_ms
    return rows


def _assert_rollups_are_the_raw_rows_downsampled(checkpoint: Checkpoint, ranges: list[tuple[int, int]]) -> None:
    raw = _raw_rows(checkpoint)
    stored = stored_rollups(TimelineRollup.objects.filter(checkpoint=checkpoint))
    assert stored == expected_rollups(raw, TIMELINE_SHAPE)
    for first, last in ranges:
        in_range = [row for row in raw if first <= row["batch_id"] <= last]
        for width in (8, 32):
            rolled = read_rolled(TIMELINE_SERIES, checkpoint.pk, first, last, width)
            assert rolled == downsample_rows(in_range, TIMELINE_SHAPE, width=width), (first, last, width)


def _timestamp_ms(batch_id: int, rng: random.Random) -> int:
    """Batches a minute apart, some a few seconds or most of a minute late (intervals tie too)."""
    return 0 if batch_id == UNTIMED_BATCH else 1_531_292_100_000 + batch_id * 61_000 + rng.choice([0, 0, 5_000, 50_000])


def _sync_new_batches(
    directory: Path, checkpoint: Checkpoint, batch_ids: range, rng: random.Random, sync=sync_checkpoint
) -> None:
    """Write each batch, sync, and so on; a batch left uncommitted is committed before the next one."""
    for batch_id in batch_ids:
        timestamp = _timestamp_ms(batch_id, rng)
        _write_offsets(directory, batch_id, timestamp, rng.choice([5_000, timestamp - 10_000]))
        if rng.random() < 0.7:
            _write_commit(directory, batch_id)
            sync(checkpoint.pk)
        else:
            sync(checkpoint.pk)
            _write_commit(directory, batch_id)  # read by the next sync, as a late commit
    sync(checkpoint.pk)


def _reconcile(checkpoint_pk: int) -> None:
    """A sync that lists the logs (and so reads a file written behind the others)."""
    Checkpoint.objects.filter(pk=checkpoint_pk).update(last_reconciled_at=None)
    sync_checkpoint(checkpoint_pk)


@pytest.fixture
def synced_one_by_one(copy_checkpoint) -> tuple[Path, Checkpoint]:
    """Batches 5..79 synced one at a time but 23 (the last of a lowest-tier bucket), which a
    probe cannot pass (24..30 come through reconciles), then batches 3 and 23 written behind
    the others and reconciled: the interval of the batch after each changes with it."""
    directory = copy_checkpoint(INCONSISTENT)
    checkpoint = make_checkpoint(url=str(directory))
    sync_checkpoint(checkpoint.pk)
    rng = random.Random(27)
    _sync_new_batches(directory, checkpoint, range(5, 23), rng)
    _sync_new_batches(directory, checkpoint, range(24, 31), rng, sync=_reconcile)
    _sync_new_batches(directory, checkpoint, range(31, 80), rng)
    assert checkpoint.batches.filter(batch_id__in=[3, 23]).count() == 0
    for batch_id, timestamp in ((3, 1_531_292_035_000), (23, _timestamp_ms(23, rng))):
        _write_offsets(directory, batch_id, timestamp, 5_000)
        _write_commit(directory, batch_id)
    _reconcile(checkpoint.pk)
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True)) == list(range(80))
    assert not checkpoint.batches.filter(is_committed=False).exclude(batch_id=4).exists()
    return directory, checkpoint


RANGES = [(0, 79), (1, 78), (3, 50), (37, 70), (8, 15), (5, 6)]


def test_the_rollups_are_the_raw_batches_downsampled_after_batches_arrive_one_by_one_through_the_sync(
    synced_one_by_one,
):
    _, checkpoint = synced_one_by_one
    _assert_rollups_are_the_raw_rows_downsampled(checkpoint, RANGES)


def test_the_rollups_are_the_raw_batches_downsampled_after_old_batches_are_removed(synced_one_by_one):
    directory, checkpoint = synced_one_by_one
    Batch.objects.filter(checkpoint=checkpoint, batch_id__lt=45).delete()
    rebuild_timeline_rollups(checkpoint.pk)
    _assert_rollups_are_the_raw_rows_downsampled(checkpoint, [(45, 79), (50, 70)])

    _sync_new_batches(directory, checkpoint, range(80, 90), random.Random(72))
    _assert_rollups_are_the_raw_rows_downsampled(checkpoint, [(45, 89), (50, 87)])


def test_the_rollups_are_the_raw_batches_downsampled_after_a_sync_from_scratch(synced_one_by_one):
    directory, checkpoint = synced_one_by_one
    checkpoint.batches.all().delete()
    rebuild_timeline_rollups(checkpoint.pk)
    assert not TimelineRollup.objects.filter(checkpoint=checkpoint).exists()
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_batch_id=None, latest_committed_batch_id=None)
    for batch_id in range(50, 80):  # Spark purged these meanwhile: the history now starts at 50
        (directory / "offsets" / str(batch_id - 50)).unlink(missing_ok=True)
        (directory / "commits" / str(batch_id - 50)).unlink(missing_ok=True)

    _reconcile(checkpoint.pk)

    assert checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True).first() == 30
    _assert_rollups_are_the_raw_rows_downsampled(checkpoint, [(30, 79), (33, 70)])


def test_workers_build_the_rollups_of_batches_stored_before_them_chunk_by_chunk_under_the_sync_lease(
    copy_checkpoint, settings
):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 16
    directory = copy_checkpoint(INCONSISTENT)
    checkpoint = make_checkpoint(url=str(directory))
    Checkpoint.objects.filter(pk=checkpoint.pk).update(timeline_rollups_built=False)  # as migration 0028 marks it
    sync_checkpoint(checkpoint.pk)
    _sync_new_batches(directory, checkpoint, range(5, 40), random.Random(28))
    assert not TimelineRollup.objects.filter(checkpoint=checkpoint).exists(), "the syncs leave them to the build"

    assert Checkpoint.objects.take_sync_lease(checkpoint.pk, owner="a sync", now=timezone.now(), seconds=60)
    assert build_timeline_chunk(checkpoint.pk) == BUSY, "a sync holds the checkpoint"
    Checkpoint.objects.release_sync_lease(checkpoint.pk, owner="a sync")
    assert build_timeline_chunk(checkpoint.pk) == MORE
    # Between chunks syncs run: batch 4's late commit (the build has passed it: the sync refreshes
    # it) and new batches (the build reads them when it gets there).
    _write_commit(directory, 4)
    _reconcile(checkpoint.pk)
    assert checkpoint.batches.get(batch_id=4).is_committed
    _sync_new_batches(directory, checkpoint, range(40, 50), random.Random(82))
    assert [build_timeline_chunk(checkpoint.pk) for _ in range(4)] == [MORE, MORE, BUILT, BUSY]
    _assert_rollups_are_the_raw_rows_downsampled(checkpoint, [(0, 49), (2, 30)])

    _sync_new_batches(directory, checkpoint, range(50, 60), random.Random(83))
    _assert_rollups_are_the_raw_rows_downsampled(checkpoint, [(0, 59), (5, 50)])
    assert not build_timeline_rollups(checkpoint.pk), "built: nothing left to build"


MILLION = 1_000_000
SLOW_BATCH = 777_777
FILL_SQL = (
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       SELECT %(checkpoint)s, g, 1, %(start)s + g * 1000 + CASE WHEN g >= %(slow)s THEN 90000 ELSE 0 END, 0, '{}',
              '[]', g < %(last)s, now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    "ANALYZE dashboards_batch",
)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="filled with generate_series; rows read from pg_stat")
def test_the_timeline_of_a_million_batches_reads_a_bounded_number_of_rows(viewer_client):
    checkpoint = make_checkpoint(name="million", url="/nowhere/million")
    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            cursor.execute(
                sql, {"checkpoint": checkpoint.pk, "start": 1_700_000_000_000, "slow": SLOW_BATCH, "last": MILLION - 1}
            )
    rebuild_timeline_rollups(checkpoint.pk)
    url = reverse("dashboards:batch-timeline-chart", args=[checkpoint.pk])

    for query_string in ("", "?from=123457&to=876543", "?from=500000&to=501000"):
        before = rows_read_in_this_transaction()
        response = viewer_client.get(url + query_string)
        read = rows_read_in_this_transaction() - before
        assert response.status_code == 200
        assert read <= MOST_ROWS_READ, f"{query_string or 'all'}: {read:,} rows read"
    points = {point.batch_id: point for point in timeline_series(checkpoint, BatchRange()).points}
    assert points[SLOW_BATCH].interval_ms == 91_000, "the slow batch is kept"
    assert not points[MILLION - 1].is_committed, "the uncommitted batch is kept"
    assert len(points) < 3_000


UNTIMED_FILL_SQL = (
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       SELECT %(checkpoint)s, g, 1, 0, 0, '{}', '[]', true, now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    "ANALYZE dashboards_batch",
)


def _rows_read_by(client, url: str):
    before = rows_read_in_this_transaction()
    response = client.get(url)
    return response, rows_read_in_this_transaction() - before


@pytest.mark.skipif(connection.vendor != "postgresql", reason="filled with generate_series; rows read from pg_stat")
def test_the_timeline_of_a_million_untimed_batches_reads_a_bounded_number_of_rows_before_and_after_the_build(
    viewer_client,
):
    """Spark 2.0's batches have no timestamp: such a history has no roll-ups, and the timeline
    used to read every batch again at each request to find that out."""
    checkpoint = make_checkpoint(name="untimed", url="/nowhere/untimed")
    Checkpoint.objects.filter(pk=checkpoint.pk).update(timeline_rollups_built=False)  # stored before roll-ups
    with connection.cursor() as cursor:
        for sql in UNTIMED_FILL_SQL:
            cursor.execute(sql, {"checkpoint": checkpoint.pk, "last": MILLION - 1})
    chart = reverse("dashboards:batch-timeline-chart", args=[checkpoint.pk])
    slot = reverse("dashboards:timeline-chart-slot", args=[checkpoint.pk])

    response, read = _rows_read_by(viewer_client, chart)
    assert response.status_code == 503 and "1,000,000 batches" in response.json()["error"]
    assert read <= MOST_ROWS_READ, f"chart while building: {read:,} rows read"
    response, read = _rows_read_by(viewer_client, slot)
    assert "Building the chart summary of 1,000,000 batches" in response.content.decode()
    assert read <= MOST_ROWS_READ, f"notice: {read:,} rows read"

    assert build_timeline_rollups(checkpoint.pk)
    assert not TimelineRollup.objects.filter(checkpoint=checkpoint).exists()

    assert 'data-chart-url="' in viewer_client.get(slot).content.decode()
    for query_string in ("", "?from=123457&to=876543"):
        for _ in range(2):  # the second request too: nothing is built on a read
            response, read = _rows_read_by(viewer_client, chart + query_string)
            assert response.status_code == 200
            assert read <= MOST_ROWS_READ, f"{query_string or 'all'}: {read:,} rows read"
        assert "No batch here has a start time" in response.content.decode()
