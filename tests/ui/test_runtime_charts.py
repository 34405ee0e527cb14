"""A real browser draws the Runtime charts with data and marks, zooms them together and opens a batch
from a point; a checkpoint without progress shows the sentence instead of axes."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime

import pytest

from dashboards.models import BatchProgress, MaintenanceRun
from dashboards.query_page.runtime_charts import RUNTIME_CHARTS
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from kafka_progress import with_kafka_source
from ui_helpers import SCREENSHOT_DIR, draw_charts, log_in
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DEDUP = OUR_FIXTURES / "file_source_dedup"
# Per chart: its data traces' point counts, its marks' point counts, and the lines drawn for marks.
DRAWN = """() => Object.fromEntries([...document.querySelectorAll('#runtime .chart')].map(el => [el.dataset.chartPart, {
    rendered: el.dataset.rendered,
    points: el.data.filter(t => t.yaxis !== 'y2').map(t => t.x.length),
    marks: Object.fromEntries(el.data.filter(t => t.yaxis === 'y2').map(t => [t.name, t.x.length])),
    lines: el.querySelectorAll('.shapelayer path').length,
    xaxis: el.layout.xaxis.range,
}]))"""
NARROW_PX = 420
REFRESH_SECONDS = 30  # data-refresh-seconds of the section (partials/runtime.html)


@pytest.fixture
def restarted_dedup(copy_checkpoint):
    """The Spark-written dedup query with its progress, as if restarted at batch 8, and a maintenance run;
    its source reports a lag as a Kafka source would, so that every chart is drawn."""
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    progress = with_kafka_source(json.loads((base / "spark-report.json").read_text())["progress"])
    second_run = str(uuid.uuid5(uuid.NAMESPACE_URL, "restart"))
    for fields in progress:
        if fields["batchId"] >= 8:
            fields["runId"] = second_run
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")
    MaintenanceRun.objects.create(
        checkpoint=checkpoint,
        action="snapshot",
        status=MaintenanceRun.Status.SUCCEEDED,
        started_at=datetime.fromisoformat("2026-11-22T04:24:00.500+00:00"),
    )
    return checkpoint


def _open(page, live_server, checkpoint, django_user_model) -> None:
    django_user_model.objects.create_user("oncall", password="a-long-password")
    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    draw_charts(page, "#runtime .chart")
    _unstick_nav(page)


def _unstick_nav(page) -> None:
    """The section nav sticks to the top of the window: out of the way of the section's screenshots."""
    page.add_style_tag(content="nav.sections { position: static !important; }")


def test_the_runtime_charts_draw_every_batch_with_the_marks_and_zoom_together(
    browser_page, live_server, restarted_dedup, django_user_model
):
    page = browser_page
    fetched = []
    page.on("request", lambda request: fetched.append(request.url) if "/charts/runtime.json" in request.url else None)

    opened = time.monotonic()
    _open(page, live_server, restarted_dedup, django_user_model)
    drawn = page.evaluate(DRAWN)
    refreshes = int((time.monotonic() - opened) // REFRESH_SECONDS)  # a slow machine may reach the section's refresh
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.locator("#runtime").screenshot(path=str(SCREENSHOT_DIR / "runtime.png"))
    page.locator("#runtime-rates").screenshot(path=str(SCREENSHOT_DIR / "runtime-rates.png"))

    assert list(drawn) == [chart.part for chart in RUNTIME_CHARTS]
    assert 1 <= len(fetched) <= 1 + refreshes  # one answer for every chart
    for part, chart in drawn.items():
        assert chart["rendered"] == "true", part
        assert chart["points"] and all(count > 0 for count in chart["points"]), part
        # Sink compactions at 2, 5, 8, 11, 14; the restart at 8; the maintenance run.
        assert chart["marks"] == {"query restart": 1, "log compaction": 5, "maintenance run": 1, "state snapshot": 1}, (
            part
        )
        assert chart["lines"] == 8, part

    rates = page.locator("#runtime-rates")
    rates.scroll_into_view_if_needed()
    box = rates.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.4)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.4, steps=5)
    page.mouse.up()
    page.wait_for_function("() => !document.querySelector('#runtime-state-rows').layout.xaxis.autorange")
    zoomed = page.evaluate(DRAWN)
    assert zoomed["rates"]["xaxis"] == zoomed["state-rows"]["xaxis"] == zoomed["phases"]["xaxis"]
    assert zoomed["rates"]["xaxis"] != drawn["rates"]["xaxis"]


def test_clicking_a_point_opens_its_batch(browser_page, live_server, restarted_dedup, django_user_model):
    page = browser_page
    _open(page, live_server, restarted_dedup, django_user_model)
    page.locator("#runtime-input-rows").scroll_into_view_if_needed()
    # The newest point of the input rows chart (batch 15), in viewport pixels from Plotly's own axes.
    x, y = page.evaluate("""() => {
        const el = document.querySelector('#runtime-input-rows'), layout = el._fullLayout, trace = el.data[0];
        const last = trace.x.length - 1, box = el.getBoundingClientRect();
        return [box.left + layout.xaxis._offset + layout.xaxis.l2p(trace.x[last]),
                box.top + layout.yaxis._offset + layout.yaxis.l2p(trace.y[last])];
    }""")
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_url("**/batches/15/")
    assert page.locator("h1").inner_text() == "Batch 15"


def test_the_runtime_section_fits_a_narrow_screen(browser_page, live_server, restarted_dedup, django_user_model):
    page = browser_page
    page.set_viewport_size({"width": NARROW_PX, "height": 900})
    _open(page, live_server, restarted_dedup, django_user_model)
    page.locator("#runtime").screenshot(path=str(SCREENSHOT_DIR / "runtime-narrow.png"))

    # Whatever else the page holds, nothing of the Runtime section reaches past the screen's edge.
    rights = page.evaluate(
        "() => [...document.querySelectorAll('#runtime, #runtime *')].map(el => el.getBoundingClientRect().right)"
    )
    assert page.locator("#runtime .chart[data-rendered=true]").count() == len(RUNTIME_CHARTS)
    assert max(rights) <= NARROW_PX


def test_a_checkpoint_without_progress_shows_the_sentence_instead_of_axes(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    page = browser_page
    django_user_model.objects.create_user("oncall", password="a-long-password")

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.locator("#runtime-empty").wait_for()
    _unstick_nav(page)
    page.locator("#runtime").screenshot(path=str(SCREENSHOT_DIR / "runtime-empty.png"))

    assert page.locator("#runtime .chart, #runtime svg").count() == 0
    assert (
        page.locator("#runtime-empty")
        .inner_text()
        .startswith("No progress received: add the ckptweb listener or register the Spark event-log folder.")
    )
