"""Chart roll-ups of history stored before they existed (workers/rollup_builds.py): while a worker
builds them the query page and the chart endpoints say so, reading a bounded number of rows, not
the history; the build is claimed once among several workers; `manage.py build_rollups` builds
them; then the charts come back, still bounded. (That the built roll-ups equal a downsampling of
the raw rows: test_chart_rollups.py and test_timeline_rollups.py.)"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from dashboards.models import ChartRollup, Checkpoint, StreamingQuery, TimelineRollup
from factories import make_checkpoint
from rollup_expectations import MOST_ROWS_READ, rows_read_in_this_transaction
from workers import tasks

pytestmark = pytest.mark.django_db

HISTORY = 100_000
FILL_SQL = (
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       SELECT %(checkpoint)s, g, 1, 1700000000000 + g * 1000, 0, '{}', '[]', true, now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, batch_duration_ms, duration_ms, event_time,
           sources, origin, received_at)
       SELECT %(query)s, g, to_timestamp(1700000000 + g), 500, '{}', '{}', '[]', 'listener', now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    "ANALYZE dashboards_batch",
    "ANALYZE dashboards_batchprogress",
)


@pytest.fixture
def history_without_rollups() -> Checkpoint:
    """A checkpoint and its query with 100,000 batches each, stored before roll-ups existed."""
    query = StreamingQuery.objects.create(query_id=uuid.uuid4(), rollups_built=False)
    checkpoint = make_checkpoint(name="upgraded", url="/nowhere/upgraded", query=query)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(timeline_rollups_built=False)
    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            cursor.execute(sql, {"checkpoint": checkpoint.pk, "query": query.pk, "last": HISTORY - 1})
    return checkpoint


def _get_counting_rows(client, url: str):
    before = rows_read_in_this_transaction()
    response = client.get(url)
    read = rows_read_in_this_transaction() - before
    assert read <= MOST_ROWS_READ, f"{url}: {read:,} rows read"
    return response


@pytest.mark.skipif(connection.vendor != "postgresql", reason="filled with generate_series; rows read from pg_stat")
def test_the_query_page_reads_no_history_while_its_rollups_are_built_and_shows_the_charts_after(
    viewer_client, history_without_rollups
):
    checkpoint = history_without_rollups
    urls = {
        name: reverse(f"dashboards:{name}", args=[checkpoint.pk])
        for name in ("checkpoint-detail", "batch-timeline-chart", "runtime-charts")
    }
    page = _get_counting_rows(viewer_client, urls["checkpoint-detail"]).content.decode()
    assert page.count("Building the chart summary of 100,000 batches") == 2  # the timeline and the Runtime charts
    assert 'id="batch-timeline"' not in page and 'id="runtime-batch-duration"' not in page
    for chart in ("batch-timeline-chart", "runtime-charts"):
        response = _get_counting_rows(viewer_client, urls[chart])
        assert response.status_code == 503 and response["Retry-After"] == "5"
        assert response.json()["error"] == "building the chart summary of 100,000 batches…"

    call_command("build_rollups")

    assert TimelineRollup.objects.filter(checkpoint=checkpoint).exists()
    assert ChartRollup.objects.filter(query_id=checkpoint.query_id).exists()
    for slot in ("timeline-chart-slot", "runtime-charts-slot"):
        swapped = _get_counting_rows(viewer_client, reverse(f"dashboards:{slot}", args=[checkpoint.pk]))
        assert "data-chart-url=" in swapped.content.decode() and "Building" not in swapped.content.decode()
    page = _get_counting_rows(viewer_client, urls["checkpoint-detail"]).content.decode()
    assert "Building the chart summary" not in page and 'id="batch-timeline"' in page
    timeline = _get_counting_rows(viewer_client, urls["batch-timeline-chart"]).json()
    runtime = _get_counting_rows(viewer_client, urls["runtime-charts"]).json()
    assert timeline["data"] and runtime["batch-duration"]["data"]


def test_a_query_build_is_claimed_by_one_worker_until_its_claim_expires():
    query = StreamingQuery.objects.create(query_id=uuid.uuid4(), rollups_built=False)
    now = timezone.now()
    assert StreamingQuery.objects.claim_rollup_build(query.pk, now=now, seconds=60)
    assert not StreamingQuery.objects.claim_rollup_build(query.pk, now=now + timedelta(seconds=59), seconds=60)
    assert StreamingQuery.objects.claim_rollup_build(query.pk, now=now + timedelta(seconds=61), seconds=60), (
        "a crashed worker's claim expires"
    )
    StreamingQuery.objects.filter(pk=query.pk).update(rollups_built=True, rollups_claimed_until=None)
    assert not StreamingQuery.objects.claim_rollup_build(query.pk, now=now, seconds=60), "built: nothing to claim"


def test_beat_and_each_worker_start_queue_the_builds(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["build-missing-rollups"]
    assert entry["schedule"] == 60.0 and entry["task"] == tasks.build_missing_rollups.name
    assert tasks.build_rollups_at_start in tasks.worker_ready._live_receivers(None)
