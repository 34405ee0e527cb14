"""The checkpoint list in pages of 50: page links, the refreshing panel, bad page numbers, bounded work."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboards.models import Checkpoint, Finding, SyncIssue

pytestmark = pytest.mark.django_db


def register_checkpoints(count: int) -> None:
    """``count`` checkpoints named q000, q001, ... (bulk: the list does not need their sync schedules)."""
    Checkpoint.objects.bulk_create(Checkpoint(name=f"q{n:03d}", url=f"/nowhere/q{n:03d}") for n in range(count))


def names_shown(html: str) -> list[str]:
    return re.findall(r'/">(q\d{3})</a>', html)


def get_list(client, name: str = "checkpoint-list", **query) -> str:
    response = client.get(reverse(f"dashboards:{name}"), query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_list_shows_fifty_checkpoints_a_page_in_name_order(viewer_client):
    register_checkpoints(120)

    first, last = get_list(viewer_client), get_list(viewer_client, page=3)

    assert names_shown(first) == [f"q{n:03d}" for n in range(50)]
    assert names_shown(last) == [f"q{n:03d}" for n in range(100, 120)]
    assert "page 1 of 3 (1–50 of 120)" in first and 'href="?page=2" hx-get="/panels/checkpoints/?page=2"' in first
    assert 'rel="next"' not in last and 'href="?page=2"' in last


def test_one_page_of_checkpoints_has_no_page_links(viewer_client):
    register_checkpoints(50)
    html = get_list(viewer_client)
    assert len(names_shown(html)) == 50 and 'id="checkpoint-pager"' not in html


@pytest.mark.parametrize(("page", "first_shown"), [("x", "q000"), ("", "q000"), ("0", "q050"), ("-1", "q050"), ("99", "q050"), ("2.5", "q000")])
def test_a_garbage_or_out_of_range_page_shows_the_first_or_last_page(viewer_client, page, first_shown):
    register_checkpoints(60)
    for name in ("checkpoint-list", "checkpoint-list-panel"):
        assert names_shown(get_list(viewer_client, name, page=page))[0] == first_shown, name


def test_the_panel_refreshes_the_page_on_show_and_keeps_other_parameters(viewer_client):
    register_checkpoints(120)

    page = get_list(viewer_client, page=2, sort="name")
    panel = get_list(viewer_client, "checkpoint-list-panel", page=2, sort="name")

    refresh = 'id="checkpoint-list-panel" hx-get="/panels/checkpoints/?page=2&amp;sort=name"'
    assert refresh in page and refresh in panel
    assert names_shown(panel) == names_shown(page) == [f"q{n:03d}" for n in range(50, 100)]
    assert 'href="?page=3&amp;sort=name"' in panel and 'hx-push-url="?page=1&amp;sort=name"' in panel


def test_a_page_shows_the_open_issues_and_findings_of_its_own_checkpoints(viewer_client):
    register_checkpoints(60)
    broken, other = Checkpoint.objects.get(name="q055"), Checkpoint.objects.get(name="q056")
    now = timezone.now()
    for path, resolved_at in (("offsets/1", None), ("offsets/2", None), ("offsets/3", now)):
        SyncIssue.objects.create(checkpoint=broken, path=path, error_type="CorruptFileError", reason="r", resolved_at=resolved_at)
    for code, severity, resolved_at in (
        ("a", Finding.Severity.ERROR, None), ("b", Finding.Severity.WARNING, None), ("c", Finding.Severity.WARNING, None),
        ("d", Finding.Severity.ERROR, now),
    ):
        Finding.objects.create(checkpoint=broken, code=code, path="offsets/1", severity=severity, message="m", resolved_at=resolved_at)
    Finding.objects.create(checkpoint=other, code="e", path="offsets/1", severity=Finding.Severity.ERROR, message="m")

    counts = {
        c.name: (c.open_issue_count, c.finding_error_count, c.finding_warning_count)
        for c in Checkpoint.objects.for_list(Checkpoint.objects.filter(name__in=["q054", "q055", "q056"]).values("pk"))
    }
    html = get_list(viewer_client, page=2)

    assert counts == {"q054": (0, 0, 0), "q055": (2, 1, 2), "q056": (0, 1, 0)}
    row = html[html.index(">q055</a>"):html.index(">q056</a>")]
    assert '<span class="badge error">2</span>' in row and 'title="warnings">2</span>' in row


@pytest.mark.parametrize("page", ["1", "2"])
def test_a_page_makes_as_many_queries_at_200_checkpoints_as_at_60(viewer_client, page, django_assert_max_num_queries):
    register_checkpoints(60)
    get_list(viewer_client, page=page)
    with CaptureQueriesContext(connection) as few:
        get_list(viewer_client, page=page)
    few_count = len(few)  # read now: the next request empties the connection's query log
    Checkpoint.objects.bulk_create(Checkpoint(name=f"r{n:03d}", url=f"/nowhere/r{n:03d}") for n in range(140))
    with django_assert_max_num_queries(few_count):
        get_list(viewer_client, page=page)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's")
def test_the_per_checkpoint_counts_run_for_the_fifty_rows_of_a_page_only(viewer_client):
    register_checkpoints(200)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    with CaptureQueriesContext(connection) as queries:
        get_list(viewer_client, page=2)

    [sql] = [q["sql"] for q in queries.captured_queries if "dashboards_syncissue" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    # One SubPlan per count (open issues, errors, warnings), each run once per shown row.
    subplan_loops = re.findall(r"SubPlan \d+\n\s+->.*?loops=(\d+)", plan)
    assert subplan_loops == ["50", "50", "50"], plan
    assert "LIMIT 50 OFFSET 50" in sql

