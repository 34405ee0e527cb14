"""The checkpoint list: status first, counts per status, search, filters, sorts, copies, pages of 50."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboards.models import BatchProgress, Checkpoint, Finding, QueryRun, StreamingQuery, SyncIssue, SyncRun
from dashboards.models.status_facts import status_facts_of

pytestmark = pytest.mark.django_db


def register_checkpoints(count: int, prefix: str = "q") -> None:
    """``count`` checkpoints named q000, q001, ... (bulk: the list does not need their sync schedules)."""
    Checkpoint.objects.bulk_create(
        Checkpoint(name=f"{prefix}{n:03d}", url=f"/nowhere/{prefix}{n:03d}") for n in range(count)
    )


def names_shown(html: str) -> list[str]:
    return re.findall(r'<tr class="[^"]*" data-checkpoint="([^"]+)"', html)


def statuses_shown(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-checkpoint="([^"]+)" data-status="([^"]+)"', html))


def get_list(client, name: str = "checkpoint-list", **query) -> str:
    response = client.get(reverse(f"dashboards:{name}"), query)
    assert response.status_code == 200
    return response.content.decode()


def live(
    name: str, *, seconds_ago: float = 3, url: str | None = None, query: StreamingQuery | None = None, **figures
) -> Checkpoint:
    """A checkpoint a sync found running: batch 10 planned ``seconds_ago``, committed, synced just now."""
    now = timezone.now()
    figures = {
        "latest_batch_id": 10,
        "latest_batch_at": now - timedelta(seconds=seconds_ago),
        "latest_committed_batch_id": 10,
        "last_synced_at": now,
        "typical_gap_ms": 5_000,
        **figures,
    }
    return Checkpoint.objects.create(name=name, url=url or f"/data/{name}", query=query, **figures)


def test_the_list_shows_fifty_checkpoints_a_page_worst_status_first_then_by_name(viewer_client):
    register_checkpoints(120)
    live("a-running")
    live("b-stopped", seconds_ago=3600)

    first, last = get_list(viewer_client), get_list(viewer_client, page=3)

    assert names_shown(first) == ["b-stopped"] + [f"q{n:03d}" for n in range(49)]
    assert names_shown(last)[-1] == "a-running"
    assert "page 1 of 3 (1–50 of 122)" in first and 'href="?page=2"' in first


def test_one_page_of_checkpoints_has_no_page_links(viewer_client):
    register_checkpoints(50)
    html = get_list(viewer_client)
    assert len(names_shown(html)) == 50 and 'id="checkpoint-pager"' not in html


@pytest.mark.parametrize(
    ("page", "first_shown"),
    [("x", "q000"), ("", "q000"), ("0", "q050"), ("-1", "q050"), ("99", "q050"), ("2.5", "q000")],
)
def test_a_garbage_or_out_of_range_page_shows_the_first_or_last_page(viewer_client, page, first_shown):
    register_checkpoints(60)
    for name in ("checkpoint-list", "checkpoint-list-panel"):
        assert names_shown(get_list(viewer_client, name, page=page))[0] == first_shown, name


def test_the_refresh_asks_for_the_same_filters_sort_and_page(viewer_client):
    register_checkpoints(120)

    page = get_list(viewer_client, page=2, sort="name", q="q")
    panel = get_list(viewer_client, "checkpoint-list-panel", page=2, sort="name", q="q")

    refresh = 'hx-get="/panels/checkpoints/?page=2&amp;sort=name&amp;q=q"'
    assert refresh in page and refresh in panel
    assert names_shown(panel) == names_shown(page) == [f"q{n:03d}" for n in range(50, 100)]
    assert 'href="?page=3&amp;sort=name&amp;q=q"' in panel


def test_each_row_says_its_status_and_why(viewer_client):
    live("orders")
    live("payments", seconds_ago=9 * 60)
    Checkpoint.objects.create(name="fresh", url="/data/fresh")

    html = get_list(viewer_client)

    assert statuses_shown(html) == {"payments": "stopped", "fresh": "not-started", "orders": "running"}
    row = html[html.index('data-checkpoint="payments"') : html.index('data-checkpoint="fresh"')]
    assert "no new batch for 9 min (batch 10)" in row and "add the listener or register the event log" in row


def test_the_counts_per_status_are_links_to_the_filtered_list(viewer_client):
    live("orders")
    live("payments", seconds_ago=9 * 60)
    live("refunds", seconds_ago=20 * 60)

    html = get_list(viewer_client)
    stopped = get_list(viewer_client, status="stopped")

    assert re.search(r'href="\?status=stopped"[^>]*data-status="stopped">stopped <b>2</b>', html)
    assert re.search(r'data-status="running">running <b>1</b>', html)
    assert names_shown(stopped) == ["payments", "refunds"]
    assert re.search(r'class="count all"[^>]*>all <b>3</b>', stopped), "the counts ignore the status filter"


def test_search_finds_by_name_path_query_id_and_query_name(viewer_client):
    query = StreamingQuery.objects.create(
        query_id=uuid.UUID("6f1c1d2e-0000-4000-8000-000000000001"), name="orders_to_lake"
    )
    live("orders", query=query, url="s3://lake/ckpt/orders")
    live("payments")

    assert names_shown(get_list(viewer_client, q="PAYM")) == ["payments"]
    assert names_shown(get_list(viewer_client, q="lake/ckpt")) == ["orders"]
    assert names_shown(get_list(viewer_client, q="6f1c1d2e")) == ["orders"]
    assert names_shown(get_list(viewer_client, q="orders_to")) == ["orders"]
    assert 'id="no-match"' in get_list(viewer_client, q="nothing-like-this")


def test_filters_by_provider_storage_scheme_and_findings(viewer_client):
    live("hdfs-agg", state_providers="hdfs", url="/data/hdfs-agg")
    live("rocks-join", state_providers="rocksdb", url="s3://lake/rocks-join")
    damaged = live("stateless", url="abfs://container/stateless")
    Finding.objects.create(
        checkpoint=damaged, code="x", path="offsets/1", severity=Finding.Severity.WARNING, message="m"
    )

    assert names_shown(get_list(viewer_client, provider="rocksdb")) == ["rocks-join"]
    assert names_shown(get_list(viewer_client, scheme="file")) == ["hdfs-agg"]
    assert names_shown(get_list(viewer_client, scheme="abfs")) == ["stateless"]
    assert names_shown(get_list(viewer_client, findings="1")) == ["stateless"]


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("latest_batch", ["old", "mid", "new"]),
        ("-latest_batch", ["new", "mid", "old"]),
        ("duration", ["new", "old", "mid"]),
        ("-input_rate", ["mid", "old", "new"]),
        ("state_size", ["old", "new", "mid"]),
        ("-name", ["old", "new", "mid"]),
        ("behind_head", ["new", "old", "mid"]),
        ("-behind_head", ["old", "new", "mid"]),
    ],
)
def test_every_column_sorts_and_rows_without_a_value_go_last(viewer_client, sort, expected):
    live("old", seconds_ago=40, recent_batch_duration_ms=900, recent_input_rate=5.0, state_bytes=10, **_lag(9_000))
    live("mid", seconds_ago=20, recent_batch_duration_ms=None, recent_input_rate=50.0, state_bytes=None)
    live("new", seconds_ago=10, recent_batch_duration_ms=300, recent_input_rate=None, state_bytes=2_000, **_lag(40))

    assert names_shown(get_list(viewer_client, sort=sort)) == expected


def _lag(recent: int, earlier: int | None = None) -> dict:
    """The offsets behind head of the newest and oldest recent batches (the same: not growing)."""
    return {"recent_offsets_behind": recent, "earlier_offsets_behind": recent if earlier is None else earlier}


def test_the_list_shows_how_far_behind_their_head_the_sources_are_where_they_report_it(viewer_client):
    live("kafka-orders", **_lag(12_500, earlier=800))
    live("rate-demo")

    cells = dict(
        re.findall(r'data-checkpoint="([^"]+)".*?<td class="behind-head">(.*?)</td>', get_list(viewer_client), re.S)
    )

    assert " ".join(re.sub(r"<[^>]+>", " ", cells["kafka-orders"]).split()) == (
        "12,500 offsets from 800 over the recent batches"
    )
    assert re.sub(r"<[^>]+>", "", cells["rate-demo"]) == "—"
    assert "No source of the recent batches reports how far it is behind its head" in cells["rate-demo"]


def test_a_sorted_header_says_its_order_and_links_to_the_other_one(viewer_client):
    live("orders")

    html = get_list(viewer_client, sort="latest_batch")

    assert (
        '<th aria-sort="ascending"><a href="?sort=-latest_batch" data-sort="latest_batch">Latest batch</a> ▲</th>'
        in html
    )


def test_two_checkpoints_with_the_same_query_id_are_flagged_on_both_rows(viewer_client):
    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    original, copy = (
        live("orders", query=query),
        live("orders-restored", query=query, latest_batch_id=5, latest_committed_batch_id=5),
    )
    live("payments", query=StreamingQuery.objects.create(query_id=uuid.uuid4()))

    html = get_list(viewer_client)

    for row, other in ((original, copy), (copy, original)):
        start = html.index(f'data-checkpoint="{row.name}"')
        cell = html[start : html.index("</tr>", start)]
        assert f'⚠ same query id as <a href="/checkpoints/{other.pk}/" hx-boost="false">{other.name}</a>' in cell
    assert html.count('class="copy-warning"') == 2


def test_progress_of_a_copys_later_batches_does_not_make_the_copy_look_alive(viewer_client):
    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    now = timezone.now()
    live("orders", query=query, latest_batch_id=117, latest_committed_batch_id=117)
    live("orders-copy", query=query, seconds_ago=3600, latest_batch_id=98, latest_committed_batch_id=98)
    BatchProgress.objects.create(
        query=query, batch_id=117, timestamp=now - timedelta(seconds=2), origin="listener", num_input_rows=5
    )
    BatchProgress.objects.create(
        query=query, batch_id=98, timestamp=now - timedelta(seconds=3600), origin="listener", num_input_rows=5
    )

    assert statuses_shown(get_list(viewer_client)) == {"orders-copy": "stopped", "orders": "running"}


def test_a_failed_last_sync_and_unreadable_files_show_as_failing_to_sync(viewer_client):
    broken, unreadable = live("broken"), live("unreadable")
    SyncRun.objects.create(
        checkpoint=broken,
        finished_at=timezone.now(),
        status=SyncRun.Status.FAILED,
        message="s3://x: connection refused",
    )
    SyncIssue.objects.create(checkpoint=unreadable, path="offsets/3", error_type="CorruptFileError", reason="r")

    html = get_list(viewer_client)

    assert statuses_shown(html) == {"broken": "failing-to-sync", "unreadable": "failing-to-sync"}
    assert "the last sync failed: s3://x: connection refused" in html and "1 file cannot be read" in html


def test_the_lists_plain_rows_give_the_health_model_what_the_query_page_gives_it():
    """The list reads rows, the query page and /metrics model instances: the same facts from both."""
    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    now = timezone.now()
    checkpoint = live(
        "orders", query=query, expected_trigger_seconds=7, trigger_interval_ms=5_000, recent_batch_duration_ms=900
    )
    SyncRun.objects.create(checkpoint=checkpoint, finished_at=now, status=SyncRun.Status.FAILED, message="refused")
    SyncIssue.objects.create(checkpoint=checkpoint, path="offsets/3", error_type="CorruptFileError", reason="r")
    Finding.objects.create(checkpoint=checkpoint, code="c", path="p", severity=Finding.Severity.ERROR, message="m")
    BatchProgress.objects.create(
        query=query, batch_id=10, timestamp=now - timedelta(seconds=9), origin="listener", num_input_rows=4
    )
    QueryRun.objects.create(query=query, run_id=uuid.uuid4(), last_batch_id=11, last_idle_at=now - timedelta(seconds=1))

    [row] = Checkpoint.objects.status_list_rows()
    from_row, from_instance = status_facts_of(row), Checkpoint.objects.with_status_facts().get().status_facts()

    assert from_row == from_instance
    assert (from_row.last_sync_failed, from_row.unreadable_files, from_row.error_findings) == (True, 1, 1)
    assert (from_row.trigger_interval_seconds, from_row.last_heard_at, from_row.last_heard_input_rows) == (
        7,
        now - timedelta(seconds=1),
        0,
    )


def test_the_empty_list_says_how_to_register_a_checkpoint(client, operator_user):
    client.force_login(operator_user)

    html = get_list(client)

    assert "No checkpoint is registered yet." in html and "Register one" in html and 'id="status-counts"' not in html


@pytest.mark.parametrize("page", ["1", "2"])
def test_a_page_makes_as_many_queries_at_200_checkpoints_as_at_60(viewer_client, page, django_assert_max_num_queries):
    register_checkpoints(60)
    get_list(viewer_client, page=page)
    with CaptureQueriesContext(connection) as few:
        get_list(viewer_client, page=page)
    few_count = len(few)  # read now: the next request empties the connection's query log
    register_checkpoints(140, prefix="r")
    with django_assert_max_num_queries(few_count):
        get_list(viewer_client, page=page)


def test_each_row_draws_its_own_batch_duration_per_minute_over_the_last_hour(viewer_client):
    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    now = timezone.now()
    live("orders", query=query, latest_batch_id=30, latest_committed_batch_id=30)
    live("orders-copy", query=query, seconds_ago=7200, latest_batch_id=9, latest_committed_batch_id=9)
    for batch_id, minutes_ago, duration_ms in ((5, 130, 40_000), (20, 50, 300), (25, 20, 900), (30, 1, 600)):
        BatchProgress.objects.create(
            query=query,
            batch_id=batch_id,
            timestamp=now - timedelta(minutes=minutes_ago),
            batch_duration_ms=duration_ms,
            origin="listener",
        )

    html = get_list(viewer_client)

    orders = html[html.index('data-checkpoint="orders"') :]
    copy = html[html.index('data-checkpoint="orders-copy"') : html.index('data-checkpoint="orders"')]
    assert 'aria-label="batch duration per minute, last hour: 300 ms to 900 ms"' in orders
    assert orders.count("<polyline", 0, orders.index("</tr>")) == 1
    assert re.search(r'<polyline points="(\S+ ){2}\S+"', orders), "three minutes with batches, three points"
    assert 'title="no progress in the last hour"' in copy, (
        "the copy's batches ran two hours ago; the live query's are not its own"
    )
