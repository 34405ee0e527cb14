"""The Runtime charts' roll-ups (dashboards/query_page/rollups.py): every stored bucket equals the
min/max of the raw rows it covers, and a chart read from them keeps the rows the SQL downsampling
of the raw rows keeps, after progress arrives one batch at a time (out of order and re-sent too),
after old progress is removed, after a query's progress is stored again from scratch, and after a
worker builds them for progress stored before they existed (some arriving during the build); and
a chart of a million batches reads a bounded number of rows."""

from __future__ import annotations

import random
import uuid

import pytest
from django.db import connection
from django.urls import reverse

from dashboards.models import BatchProgress, ChartRollup, StreamingQuery
from dashboards.query_page.chart_series import BatchRange, bucket_width
from dashboards.query_page.downsample import select_downsampled
from dashboards.query_page.rollups import LOWEST_TIER, read_rolled
from dashboards.query_page.runtime_series import RUNTIME_MAX_POINTS, rebuild_runtime_rollups, rolled_series
from factories import make_checkpoint
from progress_reports import START_MS, TEMPLATE, post_progress, progress_report
from rollup_expectations import MOST_ROWS_READ, expected_rollups, rows_read_in_this_transaction, stored_rollups
from workers import rollup_builds

pytestmark = pytest.mark.django_db


def _assert_rollups_are_the_raw_rows_downsampled(query_pk: int, ranges: list[tuple[int, int]]) -> None:
    for series in rolled_series():
        stored = stored_rollups(ChartRollup.objects.filter(query_id=query_pk, series=series.name))
        expected = expected_rollups(list(series.rows(query_pk, BatchRange())), series.shape)
        assert stored == expected, series.name
        for first, last in ranges:
            width = max(1 << LOWEST_TIER, bucket_width((first, last), series.shape, max_points=RUNTIME_MAX_POINTS))
            for tier_width in {width, width * 4}:
                raw = select_downsampled(series.rows(query_pk, BatchRange(first, last)), series.shape, width=tier_width)
                rolled = read_rolled(series, query_pk, first, last, tier_width)
                assert _keys(rolled, series) == _keys(raw, series), (series.name, first, last, tier_width)


def _keys(rows: list[dict], series) -> list[tuple[int, int]]:
    shape = series.shape
    return [(0 if shape.partition is None else row[shape.partition], row[shape.key]) for row in rows]


RANGES = [(0, 159), (1, 158), (37, 150), (100, 101), (5, 120), (64, 127)]


@pytest.fixture
def sent_one_by_one(client, pipeline_token) -> int:
    """160 batches' progress sent to the ingest API one at a time, some late, some sent twice; the query's pk."""
    rng = random.Random(25)
    order = list(range(160))
    order[100:110] = reversed(order[100:110])  # a late batch or two
    reports = [progress_report(batch_id, rng) for batch_id in order]
    resent = [progress_report(batch_id, rng) for batch_id in (3, 70, 71, 159)]  # a restart reports them again
    post_progress(client, pipeline_token, reports + resent)
    return StreamingQuery.objects.get().pk


def test_the_rollups_are_the_raw_rows_downsampled_after_progress_arrives_one_batch_at_a_time(sent_one_by_one):
    _assert_rollups_are_the_raw_rows_downsampled(sent_one_by_one, RANGES)


def test_the_rollups_are_the_raw_rows_downsampled_after_a_batch_far_above_the_history_arrives(
    sent_one_by_one, client, pipeline_token
):
    # The sync caught up past Spark's purge (or a listener reports after an outage): batch 5000
    # follows batch 159, so the top tier grows by several at once.
    rng = random.Random(5000)
    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in (5000, 5001)])
    _assert_rollups_are_the_raw_rows_downsampled(sent_one_by_one, [(0, 5001), (0, 4095), (100, 5000)])


def test_the_rollups_are_the_raw_rows_downsampled_after_old_progress_is_removed(sent_one_by_one):
    BatchProgress.objects.filter(query_id=sent_one_by_one, batch_id__lt=77).delete()
    rebuild_runtime_rollups(sent_one_by_one)
    _assert_rollups_are_the_raw_rows_downsampled(sent_one_by_one, [(77, 159), (90, 150)])


def test_the_rollups_are_the_raw_rows_downsampled_after_the_progress_is_stored_again_from_scratch(
    sent_one_by_one, client, pipeline_token
):
    BatchProgress.objects.filter(query_id=sent_one_by_one).delete()
    rebuild_runtime_rollups(sent_one_by_one)
    assert not ChartRollup.objects.filter(query_id=sent_one_by_one).exists()
    rng = random.Random(52)
    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in range(120)])
    _assert_rollups_are_the_raw_rows_downsampled(sent_one_by_one, [(0, 119), (9, 110)])


def test_workers_build_the_rollups_of_progress_stored_before_them_chunk_by_chunk_with_what_arrives_meanwhile(
    client, pipeline_token, settings
):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 32
    # A query whose progress was stored before roll-ups existed (migration 0028 marks it so).
    query = StreamingQuery.objects.create(query_id=TEMPLATE["id"], rollups_built=False)
    rng = random.Random(28)
    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in range(100)])
    assert not ChartRollup.objects.filter(query=query).exists(), "the ingest leaves them to the build"

    assert rollup_builds.build_runtime_chunk(query.pk) == rollup_builds.MORE
    assert StreamingQuery.objects.get(pk=query.pk).rollups_through == 31
    # Batch 7 again (a restart re-sends it): the build has passed it, so the ingest refreshes it;
    # the build reads 100..102 when it gets there.
    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in (100, 101, 102, 7)])
    assert rollup_builds.build_runtime_chunk(query.pk) == rollup_builds.MORE
    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in (40, 120)])
    steps = [rollup_builds.build_runtime_chunk(query.pk) for _ in range(3)]
    assert steps == [rollup_builds.MORE, rollup_builds.BUILT, rollup_builds.BUSY]
    _assert_rollups_are_the_raw_rows_downsampled(query.pk, [(0, 120), (3, 99)])

    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in range(103, 140)])
    _assert_rollups_are_the_raw_rows_downsampled(query.pk, [(0, 139), (9, 130)])
    assert not rollup_builds.build_runtime_rollups(query.pk), "built: nothing left to claim"


MILLION = 1_000_000
FILL_SQL = (
    """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, batch_duration_ms, duration_ms, event_time,
           sources, origin, received_at)
       SELECT %(query)s, g, to_timestamp((%(start)s + g * 1000) / 1000.0), CASE WHEN g = 777777 THEN 90000 ELSE 500 END,
              '{}', '{}', '[]', 'listener', now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    "ANALYZE dashboards_batchprogress",
)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="filled with generate_series; rows read from pg_stat")
def test_the_runtime_charts_of_a_million_batches_read_a_bounded_number_of_rows(viewer_client):
    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    checkpoint = make_checkpoint(name="million", url="/nowhere/million", query=query)
    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            cursor.execute(sql, {"query": query.pk, "start": START_MS, "last": MILLION - 1})
    rebuild_runtime_rollups(query.pk)
    url = reverse("dashboards:runtime-charts", args=[checkpoint.pk])

    for query_string in ("", "?from=123457&to=876543", "?from=500000&to=501000"):
        before = rows_read_in_this_transaction()
        response = viewer_client.get(url + query_string)
        read = rows_read_in_this_transaction() - before
        assert response.status_code == 200
        assert read <= MOST_ROWS_READ, f"{query_string or 'all'}: {read:,} rows read"
    durations = next(trace for trace in response.json()["batch-duration"]["data"] if trace.get("customdata"))
    whole = viewer_client.get(url).json()["batch-duration"]["data"]
    assert any(777_777 in (trace.get("customdata") or []) for trace in whole), "the slow batch is kept"
    assert durations
