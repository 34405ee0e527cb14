"""A real browser sees the compaction, state, integrity and inventory panels, and decodes state rows."""

from __future__ import annotations

import json

import pytest

from dashboards.models import BatchProgress
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, draw_charts, log_in
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DEDUP = OUR_FIXTURES / "file_source_dedup"
CHARTS = ("#batch-timeline", "#state-heatmap", "#inventory-growth", "#runtime-state-rows")


def test_query_page_renders_every_panel_of_a_file_source_query(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    for progress in json.loads((base / "spark-report.json").read_text())["progress"]:
        BatchProgress.objects.store(progress_from_dict(progress, source="spark-report.json"), origin="listener")
    page = browser_page

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    draw_charts(page, ", ".join((*CHARTS, "#compaction .chart")))

    for chart in CHARTS:
        assert page.get_attribute(chart, "data-rendered") == "true", chart
    assert page.locator("#compaction .chart[data-rendered=true]").count() == 2  # the source log and the sink log
    assert page.locator("#metadata-logs tbody tr").count() == 2
    assert page.locator("#state-stores tbody tr").count() == 1
    assert page.locator("#inventory tbody tr").count() >= 4
    assert page.locator("#findings-none").count() == 1
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "health_panels.png"), full_page=True)


def _open_first_partition(page, live_server, copy_checkpoint, django_user_model, fixture, name: str) -> None:
    """Sync a copy of ``fixture``, log in as on-call and open its first state partition's page."""
    django_user_model.objects.create_user("oncall", password="a-long-password")
    base = copy_checkpoint(fixture)
    checkpoint = make_checkpoint(name=name, url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.click("#state summary")
    page.click("#state-partitions a >> nth=0")


def _column_names(page) -> list[str]:
    return page.eval_on_selector_all("#sample-rows thead th.mono", "cells => cells.map(cell => cell.textContent)")


def test_on_call_decodes_sample_rows_of_a_partition(
    browser_page, live_server, copy_checkpoint, django_user_model, eager_celery
):
    page = browser_page
    _open_first_partition(page, live_server, copy_checkpoint, django_user_model, DEDUP, "dedup")
    page.click("text=Decode sample rows")
    page.wait_for_selector("#sample-rows")

    rows = page.locator("#sample-rows tbody tr")
    assert rows.count() > 0
    # The dedup query keys state by the event id of the input files ("e<n>") and its event time.
    assert _column_names(page)[:2] == ["id", "event_time"]
    assert rows.first.locator("td").first.inner_text().startswith("e")
    page.screenshot(path=str(SCREENSHOT_DIR / "state_partition.png"), full_page=True)


def test_on_call_decodes_sample_rows_of_a_rocksdb_partition(
    browser_page, live_server, copy_checkpoint, django_user_model, eager_celery
):
    page = browser_page
    fixture = OUR_FIXTURES / "rocksdb_checkpoint_v2_dedup"
    _open_first_partition(page, live_server, copy_checkpoint, django_user_model, fixture, "rocksdb dedup")
    # Version 12 is a zip plus two changelogs: the rows come from the zip's SST files.
    assert "20 at version 12" in page.inner_text("dl.figures")
    assert page.inner_text("#partition-as-of").startswith("As of batch 11 (state version 12), read ")
    page.click("text=Decode sample rows")
    page.wait_for_selector("#sample-rows")

    rows = page.locator("#sample-rows tbody tr")
    assert rows.count() == 20
    assert _column_names(page)[:2] == ["id", "event_time"]
    assert rows.first.locator("td").first.inner_text().startswith("e")
    page.screenshot(path=str(SCREENSHOT_DIR / "state_partition_rocksdb.png"), full_page=True)
    page.set_viewport_size({"width": 480, "height": 1000})
    page.screenshot(path=str(SCREENSHOT_DIR / "state_partition_rocksdb_narrow.png"), full_page=True)


def test_on_call_decodes_a_join_partition_into_columns_named_as_spark_wrote_them(
    browser_page, live_server, copy_checkpoint, django_user_model, eager_celery
):
    page = browser_page
    _open_first_partition(
        page, live_server, copy_checkpoint, django_user_model, OUR_FIXTURES / "stream_stream_join", "join"
    )
    page.click("text=Decode sample rows")
    page.wait_for_selector("#sample-rows")

    # Spark's schema names a join's key columns by position; the page says what field0 is.
    assert _column_names(page)[0] == "field0"
    assert "field0 is the first key column" in page.inner_text("#sample-key-names")
    assert "{" not in page.inner_text("#sample-rows tbody")
    page.screenshot(path=str(SCREENSHOT_DIR / "state_partition_join.png"), full_page=True)


def test_the_state_panel_of_a_batch_killed_before_its_commit_names_the_version_a_restart_rewrites(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    # Spark's run was killed in batch 6 after it wrote state version 7; batch 5's commit means version 6.
    django_user_model.objects.create_user("oncall", password="a-long-password")
    checkpoint = make_checkpoint(
        name="killed", url=str(copy_checkpoint(OUR_FIXTURES / "killed_mid_batch") / "checkpoint")
    )
    sync_checkpoint(checkpoint.pk)
    page = browser_page

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    state = page.locator("#state")
    state.scroll_into_view_if_needed()

    assert page.locator("#state-stores tbody tr td").nth(4).inner_text() == "6"
    note = page.locator("#state-uncommitted-0-default")
    assert note.is_visible()
    assert " ".join(note.inner_text().split()).startswith("Operator 0 store default also holds version 7,")
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    state.screenshot(path=str(SCREENSHOT_DIR / "state_uncommitted.png"))
