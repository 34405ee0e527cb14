"""A real browser finds the query in trouble: status counts, search, filters and sorts of the list.

Each step is a URL (pushed by htmx), so the test also reloads one and checks the list it shows.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboards.models import Checkpoint, Finding, StreamingQuery
from ui_helpers import SCREENSHOT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _register_a_fleet() -> None:
    now = timezone.now()

    def checkpoint(name: str, seconds_ago: float, **figures) -> Checkpoint:
        query = StreamingQuery.objects.create(query_id=uuid.uuid4(), name=f"{name}_query")
        defaults = {
            "latest_batch_id": 40,
            "latest_batch_at": now - timedelta(seconds=seconds_ago),
            "latest_committed_batch_id": 40,
            "last_synced_at": now,
            "typical_gap_ms": 10_000,
            "state_providers": "hdfs",
        }
        return Checkpoint.objects.create(name=name, url=f"/data/{name}", query=query, **{**defaults, **figures})

    checkpoint("orders", 5, recent_batch_duration_ms=900)
    checkpoint("payments", 5, recent_batch_duration_ms=2_500, state_providers="rocksdb")
    checkpoint("clicks", 20 * 60)
    checkpoint("refunds", 40 * 60, state_providers="rocksdb")
    stuck = checkpoint("ledger", 15 * 60, latest_batch_id=41)
    Finding.objects.create(
        checkpoint=stuck, code="x", path="offsets/41", severity=Finding.Severity.WARNING, message="m"
    )


def _names(page) -> list[str]:
    return page.locator("#checkpoint-table tbody tr").evaluate_all("rows => rows.map(row => row.dataset.checkpoint)")


def test_an_on_call_engineer_follows_a_status_count_searches_filters_and_sorts(
    browser_page, live_server, django_user_model
):
    from playwright.sync_api import expect

    django_user_model.objects.create_user("oncall", password="a-long-password")
    _register_a_fleet()
    page = browser_page
    log_in(page, live_server.url, "/", "oncall", "a-long-password")

    # Worst first: the stalled batch, then the stopped queries, then the running ones.
    expect(page.locator("#checkpoint-table tbody tr").first).to_have_attribute("data-checkpoint", "ledger")
    assert _names(page) == ["ledger", "clicks", "refunds", "orders", "payments"]
    page.screenshot(path=str(SCREENSHOT_DIR / "list-health.png"), full_page=True)

    page.click('#status-counts a[data-status="stopped"]')
    expect(page).to_have_url(re.compile(r"/\?status=stopped$"))
    expect(page.locator("#checkpoint-table tbody tr")).to_have_count(2)
    assert _names(page) == ["clicks", "refunds"]
    expect(page.locator("#status-counts a.current")).to_contain_text("stopped 2")

    page.fill("#checkpoint-search", "refu")
    page.click("#checkpoint-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"status=stopped"))
    expect(page.locator("#checkpoint-table tbody tr")).to_have_count(1)
    assert _names(page) == ["refunds"]

    page.goto(live_server.url + "/")
    page.select_option("#checkpoint-filters select[name=provider]", "rocksdb")
    page.click("#checkpoint-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"provider=rocksdb"))
    expect(page.locator("#checkpoint-table tbody tr")).to_have_count(2)
    assert sorted(_names(page)) == ["payments", "refunds"]

    page.goto(live_server.url + "/")
    page.click('#checkpoint-table th a[data-sort="duration"]')
    expect(page).to_have_url(re.compile(r"sort=duration$"))
    expect(page.locator("#checkpoint-table tbody tr").first).to_have_attribute("data-checkpoint", "orders")
    page.click('#checkpoint-table th a[data-sort="duration"]')
    expect(page).to_have_url(re.compile(r"sort=-duration$"))
    expect(page.locator("#checkpoint-table tbody tr").first).to_have_attribute("data-checkpoint", "payments")

    # The URL is the state: reloading it shows the same list.
    page.reload()
    expect(page.locator("#checkpoint-table tbody tr").first).to_have_attribute("data-checkpoint", "payments")
    expect(page.locator('th[aria-sort="descending"]')).to_contain_text("Batch duration")


def test_the_list_fits_a_narrow_screen_by_scrolling_its_table_only(browser_page, live_server, django_user_model):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    _register_a_fleet()
    page = browser_page
    page.set_viewport_size({"width": 420, "height": 900})
    log_in(page, live_server.url, "/", "oncall", "a-long-password")
    page.wait_for_selector("#checkpoint-table")

    page_width = page.evaluate("document.documentElement.scrollWidth")
    page.screenshot(path=str(SCREENSHOT_DIR / "list-health-narrow.png"), full_page=True)

    assert page_width <= 420, f"the page is {page_width} px wide on a 420 px screen"
