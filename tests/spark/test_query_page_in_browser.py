"""A real browser opens the page of a query PySpark is running, then of the same query stopped.

The shipped listener posts the query's progress to a live ckptweb; after a sync the page must say
whether the query runs, draw every section with data (timeline, runtime charts, state, integrity,
runs, files, batches), and the state panel's "as of" must name the batch whose state it shows: the
newest committed batch in the batch table, at the state version that batch wrote.
"""

from __future__ import annotations

import re
import time

import pytest

from dashboards.models import BatchProgress
from factories import make_checkpoint
from pipelines.queries import FIXTURE_START_MS, RateSpec, stop_between_batches, windowed_agg_noop_query
from ui_helpers import SCREENSHOT_DIR, draw_charts, log_in, open_page
from worker_process import wait_for
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIGGER_SECONDS = 3
QUIET_SECONDS = 12  # the stopped-after floor of this test, so that the stopped query shows as stopped soon
BATCHES = 4
EVERY_SECTION_DRAWN = """() => [...document.querySelectorAll('#timeline .chart, #runtime .chart, #state .chart')]
    .every(el => el.dataset.rendered === 'true')"""
RUNTIME_POINTS = (
    "() => Object.fromEntries([...document.querySelectorAll('#runtime .chart')].map(el => [el.dataset.chartPart, "
    "Math.max(0, ...el.data.map(t => (t.x || []).length))]))"
)


@pytest.fixture
def page():
    yield from open_page()


def test_the_page_of_a_running_then_stopped_query_draws_every_section_and_dates_its_state(
    spark, listener, live_server, checkpoint_roots, settings, django_user_model, page
):
    settings.HEALTH_STOPPED_AFTER_SECONDS = QUIET_SECONDS
    settings.HEALTH_STALLED_AFTER_SECONDS = QUIET_SECONDS
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    django_user_model.objects.create_user("oncall", password="a-long-password")
    rate = RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000)
    query = (
        windowed_agg_noop_query(spark, checkpoint_roots / "paged", "paged", rate)
        .trigger(processingTime=f"{TRIGGER_SECONDS} seconds")
        .start()
    )
    try:
        checkpoint = make_checkpoint(
            name="paged",
            url=str(checkpoint_roots / "paged" / "checkpoint"),
            sync_interval_seconds=5,
            expected_trigger_seconds=TRIGGER_SECONDS,
        )
        wait_for(
            lambda: (query.lastProgress or {}).get("batchId", -1) >= BATCHES - 1, f"{BATCHES} batches", timeout=240
        )
        wait_for(
            lambda: BatchProgress.objects.filter(run__run_id=query.runId).count() >= BATCHES,
            "the listener's progress",
            timeout=240,
        )
        sync_checkpoint(checkpoint.pk)
        log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
        running = _sections_shown(page, "running")
    finally:
        stop_between_batches(query, timeout_seconds=30)
    assert running["status"] == "running"

    time.sleep(QUIET_SECONDS + 1)
    sync_checkpoint(checkpoint.pk)
    page.goto(live_server.url + checkpoint.get_absolute_url())
    stopped = _sections_shown(page, "stopped")
    assert stopped["status"] == "stopped"
    assert stopped["newest_batch"] >= running["newest_batch"]


def _sections_shown(page, name: str) -> dict:
    """Scroll to every chart (charts.js draws one when it comes near the screen), check each section
    has data, and return the status and newest batch."""
    draw_charts(page, "#timeline .chart, #runtime .chart, #state .chart")
    page.wait_for_function(EVERY_SECTION_DRAWN)
    status = page.get_attribute("#query-status", "data-status")
    points = page.evaluate(RUNTIME_POINTS)
    # Spark's rate source reports no latestOffset: the lag chart is the one drawn as a sentence.
    assert [part for part, count in points.items() if count == 0] == ["behind-head"], points
    assert page.locator("#runtime-behind-head").inner_text().startswith("No source reported how far")
    assert page.locator("#runtime-empty").count() == 0
    assert page.locator("#runs-table tbody tr").count() == 1  # one start of the query so far
    assert page.locator("#inventory tbody tr").count() >= 3  # offsets/, commits/, state/...
    assert page.locator("#integrity").inner_text().strip() != "Integrity"
    batch_links = page.locator("#batch-table-panel tbody tr td:first-child a")
    newest_batch = max(int(text) for text in batch_links.all_inner_texts())
    committed_rows = page.locator("#batch-table-panel tbody tr:not(.uncommitted) td:first-child a").all_inner_texts()
    newest_committed = max(int(text) for text in committed_rows)

    # The state the panel shows is the newest committed batch's: version = batch + 1, in the table and the line.
    versions = [int(text) for text in page.locator("#state-stores tbody tr td:nth-child(5)").all_inner_texts()]
    as_of = page.inner_text("#state-as-of")
    assert re.match(
        rf"As of batch {newest_committed} \(state version {newest_committed + 1}\), read \d+ s ago\.", as_of
    ), as_of
    assert versions == [newest_committed + 1]
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / f"query_page_{name}.png"), full_page=True)
    return {"status": status, "newest_batch": newest_batch}
