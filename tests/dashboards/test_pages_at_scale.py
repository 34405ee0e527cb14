"""The query page, its charts and the batch table at thousands of batches: a fixed number of
queries, downsampled charts that keep the peaks, keyset pages, and (on PostgreSQL) index plans."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboards.models import (
    Batch,
    BatchProgress,
    Checkpoint,
    StateOperatorMetrics,
    StreamingQuery,
)
from dashboards.query_page.batch_pages import BatchPageRequest, read_batch_page
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.downsample import MAX_POINTS_PER_SERIES
from dashboards.query_page.runtime_series import rebuild_runtime_rollups
from dashboards.query_page.timeline_rollups import rebuild_timeline_rollups
from factories import make_checkpoint

pytestmark = pytest.mark.django_db

START_MS = 1_700_000_000_000
SLOW_BATCH = 3_000  # starts an hour after the batch before it; every other batch follows after 1 s
MIDDLE_UNCOMMITTED = 2_500
ROWS_SPIKE_BATCH = 1_234
CACHE_DIP_BATCH = 4_321
PAGE_URL_NAMES = ["checkpoint-detail", "batch-table-panel", "batch-timeline-chart", "runtime-charts"]


def _start_ms(batch_id: int) -> int:
    return START_MS + batch_id * 1_000 + (3_599_000 if batch_id >= SLOW_BATCH else 0)


def fill_history(batches: int, *, name: str) -> Checkpoint:
    """A checkpoint with ``batches`` batches and one stateful operator's progress for each."""
    query = StreamingQuery.objects.create(query_id=uuid.uuid5(uuid.NAMESPACE_DNS, name))
    checkpoint = make_checkpoint(name=name, url=f"/nowhere/{name}", query=query)
    last = batches - 1
    Batch.objects.bulk_create(
        (
            Batch(
                checkpoint=checkpoint,
                batch_id=b,
                offset_log_version=1,
                timestamp_ms=_start_ms(b),
                watermark_ms=_start_ms(b) - 10_000,
                sources=[f'{{"0":{b}}}'],
                is_committed=b not in (MIDDLE_UNCOMMITTED, last),
            )
            for b in range(batches)
        ),
        batch_size=1_000,
    )
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_batch_id=last, latest_committed_batch_id=last - 1)
    progress = BatchProgress.objects.bulk_create(
        (
            BatchProgress(
                query=query,
                batch_id=b,
                timestamp=datetime.fromtimestamp(_start_ms(b) / 1000, tz=UTC),
                origin="listener",
            )
            for b in range(batches)
        ),
        batch_size=1_000,
    )
    StateOperatorMetrics.objects.bulk_create(
        (
            StateOperatorMetrics(
                progress=p,
                operator_index=0,
                operator_name="dedupe",
                num_rows_total=10**9 if p.batch_id == ROWS_SPIKE_BATCH else p.batch_id,
                memory_used_bytes=1_000,
                custom_metrics={
                    "loadedMapCacheHitCount": 0 if p.batch_id == CACHE_DIP_BATCH else 9,
                    "loadedMapCacheMissCount": 1,
                },
            )
            for p in progress
        ),
        batch_size=1_000,
    )
    # The roll-ups the sync and the ingest keep as they store these rows, built once for rows made here.
    rebuild_timeline_rollups(checkpoint.pk)
    rebuild_runtime_rollups(query.pk)
    checkpoint.refresh_from_db()
    return checkpoint


@pytest.fixture
def long_history() -> Checkpoint:
    return fill_history(5_000, name="long")


def _get(client, name: str, checkpoint: Checkpoint, query: str = ""):
    response = client.get(reverse(f"dashboards:{name}", args=[checkpoint.pk]) + query)
    assert response.status_code == 200, name
    return response


@pytest.mark.parametrize("name", PAGE_URL_NAMES)
def test_a_page_makes_as_many_queries_at_10000_batches_as_at_2500(viewer_client, name, django_assert_max_num_queries):
    # Both are downsampled; each is asked for once first (the session, the user and the settled
    # part of a chart are cached from there on).
    short, long = fill_history(2_500, name="short"), fill_history(10_000, name="long")
    _get(viewer_client, name, short)
    with CaptureQueriesContext(connection) as short_queries:
        _get(viewer_client, name, short)
    short_count = len(short_queries)  # now: the next request empties the connection's query log
    _get(viewer_client, name, long)
    with django_assert_max_num_queries(short_count):
        _get(viewer_client, name, long)


def test_the_long_timeline_is_downsampled_and_keeps_the_slow_batch_and_the_uncommitted_ones(
    viewer_client, long_history
):
    figure = _get(viewer_client, "batch-timeline-chart", long_history).json()
    committed, uncommitted, interval, _ = figure["data"]
    assert "Downsampled" in figure["layout"]["title"]["text"]
    assert all(len(trace["x"]) <= MAX_POINTS_PER_SERIES for trace in figure["data"])
    # An hour-long gap among 1-second ones: the axis reads in minutes.
    assert _interval_title(figure) == "Interval since the previous batch (min)"
    assert max(interval["y"]) == 60.0 and min(interval["y"]) == pytest.approx(1 / 60)
    assert uncommitted["y"] == [MIDDLE_UNCOMMITTED, 4_999]
    # The first batch is an end; the last committed one's bucket is drawn (its lowest batch id).
    width = int(re.search(r"every ([\d,]+) batches", figure["layout"]["title"]["text"]).group(1).replace(",", ""))
    assert committed["y"][0] == 0 and committed["y"][-1] == 4_998 // width * width


def test_a_downsampled_chart_is_read_once_until_a_new_batch_arrives(viewer_client, long_history):
    first = _get(viewer_client, "batch-timeline-chart", long_history).json()
    with CaptureQueriesContext(connection) as queries:
        again = _get(viewer_client, "batch-timeline-chart", long_history).json()
    assert again == first
    assert not any("ds_bucket" in q["sql"] for q in queries.captured_queries)  # the chart's JSON is cached

    Batch.objects.create(
        checkpoint=long_history, batch_id=5_000, offset_log_version=1, timestamp_ms=_start_ms(5_000), watermark_ms=0
    )
    Checkpoint.objects.filter(pk=long_history.pk).update(latest_batch_id=5_000, uncommitted_batch_count=3)
    _, uncommitted, _, _ = _get(viewer_client, "batch-timeline-chart", long_history).json()["data"]
    assert uncommitted["y"] == [MIDDLE_UNCOMMITTED, 4_999, 5_000]

    Batch.objects.filter(checkpoint=long_history, batch_id=MIDDLE_UNCOMMITTED).update(is_committed=True)
    Checkpoint.objects.filter(pk=long_history.pk).update(uncommitted_batch_count=2)
    _, uncommitted, _, _ = _get(viewer_client, "batch-timeline-chart", long_history).json()["data"]
    assert uncommitted["y"] == [4_999, 5_000]


def test_a_narrow_batch_range_shows_every_batch_of_it(viewer_client, long_history):
    figure = _get(viewer_client, "batch-timeline-chart", long_history, "?from=2990&to=3010").json()
    committed, uncommitted, interval, _ = figure["data"]
    assert "title" not in figure["layout"] or "text" not in figure["layout"]["title"]
    assert committed["y"] == list(range(2_990, 3_011)) and uncommitted["y"] == []
    assert _interval_title(figure) == "Interval since the previous batch (min)"
    assert interval["y"] == pytest.approx([60.0 if b == SLOW_BATCH else 1 / 60 for b in range(2_991, 3_011)])
    assert interval["customdata"] == list(range(2_991, 3_011))


def _interval_title(figure: dict) -> str:
    return next(a["text"] for a in figure["layout"]["annotations"] if a["text"].startswith("Interval"))


def test_the_long_state_charts_keep_the_row_spike_and_the_cache_dip(viewer_client, long_history):
    figures = _get(viewer_client, "runtime-charts", long_history).json()
    [rows], [memory], [ratio] = (
        [t for t in figures[part]["data"] if t.get("yaxis") != "y2"]
        for part in ("state-rows", "state-memory", "state-cache")
    )
    assert "lowest and highest of every" in figures["state-rows"]["layout"]["annotations"][-1]["text"]
    assert len(rows["x"]) <= MAX_POINTS_PER_SERIES < 5_000 and set(memory["y"]) == {1_000}
    assert max(rows["y"]) == 10**9 and rows["customdata"][rows["y"].index(10**9)] == ROWS_SPIKE_BATCH
    assert min(ratio["y"]) == 0.0 and ratio["customdata"][ratio["y"].index(0.0)] == CACHE_DIP_BATCH
    assert max(ratio["y"]) == 0.9


def test_the_page_carries_the_batch_range_to_its_charts(viewer_client, long_history):
    page = _get(viewer_client, "checkpoint-detail", long_history, "?from=10&to=20").content.decode()
    assert reverse("dashboards:batch-timeline-chart", args=[long_history.pk]) + "?from=10&amp;to=20" in page
    assert reverse("dashboards:runtime-charts", args=[long_history.pk]) + "?from=10&amp;to=20" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, BatchPageRequest()),
        ({"before": "40"}, BatchPageRequest(before=40)),
        ({"after": "7"}, BatchPageRequest(after=7)),
        ({"at": "12", "before": "3"}, BatchPageRequest(before=13)),
        ({"before": "-3"}, BatchPageRequest()),
        ({"at": "twelve"}, BatchPageRequest()),
    ],
)
def test_page_parameters_are_read_and_a_mistyped_one_is_ignored(query, expected):
    assert BatchPageRequest.from_query(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, BatchRange()),
        ({"from": "5"}, BatchRange(5, None)),
        ({"from": "9", "to": "3"}, BatchRange(3, 9)),
        ({"from": "x", "to": "8"}, BatchRange(None, 8)),
    ],
)
def test_a_batch_range_is_read_with_its_ends_in_order(query, expected):
    assert BatchRange.from_query(query) == expected


def _walk(batches, request: BatchPageRequest, *, latest: int, size: int, towards: str) -> list[list[int]]:
    pages = []
    while request is not None:
        page = read_batch_page(batches, request, latest_batch_id=latest, size=size)
        pages.append([batch.batch_id for batch in page.batches])
        link = page.older_before if towards == "older" else page.newer_after
        request = None if link is None else BatchPageRequest(**{"before" if towards == "older" else "after": link})
    return pages


def test_keyset_pages_walk_every_batch_once_in_both_directions():
    checkpoint = make_checkpoint()
    ids = [b for b in range(150) if b % 4 != 1]  # gaps, as Spark's purge and failed writes leave
    Batch.objects.bulk_create(
        Batch(checkpoint=checkpoint, batch_id=b, offset_log_version=1, timestamp_ms=b, watermark_ms=0) for b in ids
    )

    older = _walk(checkpoint.batches.for_table(), BatchPageRequest(), latest=ids[-1], size=7, towards="older")
    assert [b for page in older for b in page] == ids[::-1]
    assert all(len(page) == 7 for page in older[:-1])

    # after=-1: the oldest page (batch 0 included), as if reached by the "older" links.
    newer = _walk(checkpoint.batches.for_table(), BatchPageRequest(after=-1), latest=ids[-1], size=7, towards="newer")
    assert [b for page in newer[::-1] for b in page] == ids[::-1]


def test_a_deep_batch_page_reads_fifty_rows_without_counting_or_offset(viewer_client, long_history):
    with CaptureQueriesContext(connection) as queries:
        html = _get(viewer_client, "batch-table-panel", long_history, "?before=1000").content.decode()
    shown = [int(b) for b in re.findall(r'/batches/(\d+)/">', html)]
    assert shown == list(range(999, 949, -1))
    assert "?before=950" in html and "?after=999" in html and "latest batch 4999" in html
    batch_sql = [q["sql"].upper() for q in queries.captured_queries if "dashboards_batch" in q["sql"]]
    # "OFFSET" followed by a space: the offset_log_version column is not an OFFSET clause.
    assert batch_sql and not any("COUNT(" in sql or re.search(r"\bOFFSET\s", sql) for sql in batch_sql)


def test_jumping_to_a_batch_id_shows_the_page_that_starts_there(viewer_client, long_history):
    html = _get(viewer_client, "batch-table-panel", long_history, "?at=1234").content.decode()
    assert [int(b) for b in re.findall(r'/batches/(\d+)/">', html)][:2] == [1234, 1233]
    assert 'data-page="1234"' in html


def test_the_newest_page_is_the_one_that_follows_the_syncs(viewer_client, long_history):
    html = _get(viewer_client, "checkpoint-detail", long_history).content.decode()
    panel = html[html.index('id="batch-table-panel"') - 5 :]
    assert "data-page" not in panel[:60]
    assert re.findall(r'/batches/(\d+)/">', panel)[0] == "4999"
    assert "newer</a>" not in panel and "?before=4950" in panel


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's")
@pytest.mark.parametrize(
    ("name", "query"),
    [
        ("batch-table-panel", ""),
        ("batch-table-panel", "?before=100000"),
        ("batch-timeline-chart", ""),
        ("batch-timeline-chart", "?from=150000&to=151000"),
        ("checkpoint-detail", ""),
    ],
)
def test_the_table_and_chart_queries_use_an_index_at_200k_batches(viewer_client, name, query):
    checkpoint, neighbour = make_checkpoint(), make_checkpoint(name="neighbour", url="/nowhere/neighbour")
    with connection.cursor() as cursor:
        for owner in (checkpoint, neighbour):
            cursor.execute(
                "INSERT INTO dashboards_batch (checkpoint_id, batch_id, "
                "offset_log_version, timestamp_ms, watermark_ms, conf, sources,"
                " is_committed, synced_at) SELECT %s, g, 1, %s + g * 1000, 0, "
                "'{}', '[]', true, now() FROM generate_series(0, 199999) g",
                [owner.pk, START_MS],
            )
        cursor.execute("ANALYZE dashboards_batch")
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_batch_id=199_999)

    with CaptureQueriesContext(connection) as queries:
        _get(viewer_client, name, checkpoint, query)

    batch_sql = [q["sql"] for q in queries.captured_queries if "dashboards_batch" in q["sql"]]
    assert batch_sql
    with connection.cursor() as cursor:
        for sql in batch_sql:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "Seq Scan on dashboards_batch" not in plan, f"{sql}\n{plan}"
