"""A real browser (Debian's chromium, driven by Playwright) logs in and sees the batch timeline."""

from __future__ import annotations

import pytest

from factories import make_checkpoint
from fixture_paths import SPARK_TEST_RESOURCES
from ui_helpers import SCREENSHOT_DIR, draw_charts
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_on_call_engineer_logs_in_and_sees_the_batch_timeline(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    checkpoint = make_checkpoint(
        name="inconsistent",
        url=str(copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent")),
    )
    sync_checkpoint(checkpoint.pk)
    page = browser_page

    page.goto(live_server.url + "/")
    page.fill("#id_username", "oncall")
    page.fill("#id_password", "a-long-password")
    page.click("button[type=submit]")
    page.click("text=inconsistent")
    page.wait_for_selector("#batch-timeline[data-rendered]")

    assert page.get_attribute("#batch-timeline", "data-rendered") == "true"
    assert page.locator("#batch-timeline .main-svg").count() > 0
    # Three committed batches and one uncommitted, drawn as markers in the first subplot.
    assert page.locator("#batch-timeline .scatterlayer .trace").first.locator(".point").count() == 3
    assert page.locator("#batch-table tr.uncommitted").count() == 1
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "timeline_page.png"), full_page=True)


def test_the_open_query_page_shows_a_batch_the_worker_synced_later(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    directory = copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent")
    checkpoint = make_checkpoint(name="inconsistent", url=str(directory))
    sync_checkpoint(checkpoint.pk)
    page = browser_page
    page.goto(live_server.url + checkpoint.get_absolute_url())
    page.fill("#id_username", "oncall")
    page.fill("#id_password", "a-long-password")
    page.click("button[type=submit]")
    assert page.locator("#batch-table a", has_text="5").count() == 0
    # The charts are fetched after the page; SQLite's shared in-memory test database answers a
    # write during such a read with "database table is locked" instead of waiting: sync after them.
    draw_charts(page)

    (directory / "offsets" / "5").write_bytes((directory / "offsets" / "4").read_bytes())
    sync_checkpoint(checkpoint.pk)

    # No reload: the batch table panel polls every 10 seconds.
    page.locator("#batch-table a", has_text="5").wait_for()
    from playwright.sync_api import expect

    latest = page.locator("#health dl.figures > div", has=page.locator("dt", has_text="Latest batch")).locator("dd")
    expect(latest).to_have_text("5")
