"""A real browser shows no chart without data as bare axes, draws the Files chart in the colours its
legend shows, and keeps a thousand compactions in view readable: counted bands, not a curtain."""

from __future__ import annotations

import pytest

from dashboards.models import MetadataLog
from factories import make_checkpoint
from progress_history import fill_progress_history
from ui_helpers import SCREENSHOT_DIR, draw_charts, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# What a drawn chart shows: its axes' tick labels, the sentence in place of a chart, legend entries.
SHOWN = """(selector) => { const el = document.querySelector(selector); return {
    rendered: el.dataset.rendered,
    ticks: [...el.querySelectorAll('.xtick text, .ytick text, .y2tick text')].map(t => t.textContent),
    words: [...el.querySelectorAll('.annotation-text')].map(t => [...t.querySelectorAll('tspan.line')]
      .map(line => line.textContent).join(' ') || t.textContent),
    legend: [...el.querySelectorAll('.legend .traces')].map(t => t.textContent),
}; }"""
# The Files chart: the stroke of each legend entry's line and of each drawn line, and the Files axis ticks.
FILES_LOOK = """() => { const el = document.querySelector('#inventory-growth');
  const stroke = t => { const path = t.querySelector('path.js-line');
    return path.style.stroke + ' ' + (path.style.strokeDasharray || 'solid'); };
  return {
    legend: [...el.querySelectorAll('.legend .traces')].map(t => [t.textContent, stroke(t)]),
    lines: [...el.querySelectorAll('.scatterlayer .trace')].map(stroke),
    files_ticks: [...el.querySelectorAll('.y2tick text')].map(t => t.textContent),
  }; }"""
LANE = """() => Object.fromEntries([...document.querySelectorAll('#runtime .chart')].map(el => {
  const lane = el.data.find(t => t.yaxis === 'y2' && t.name === 'log compaction');
  return [el.dataset.chartPart, {symbols: lane.x.length, counts: lane.text, shapes: el.layout.shapes.length,
                                 drawn: el.querySelectorAll('.shapelayer path').length}];
}))"""


def _open(page, live_server, checkpoint, django_user_model, path: str = "") -> None:
    django_user_model.objects.create_user("oncall", password="a-long-password")
    log_in(page, live_server.url, checkpoint.get_absolute_url() + path, "oncall", "a-long-password")
    draw_charts(page)
    page.add_style_tag(content="nav.sections { position: static !important; }")  # out of the screenshots' way
    SCREENSHOT_DIR.mkdir(exist_ok=True)


def test_a_checkpoint_without_batches_says_why_each_chart_is_empty_instead_of_drawing_axes(
    browser_page, live_server, django_user_model
):
    checkpoint = make_checkpoint(name="fresh", url="/nowhere/fresh")
    MetadataLog.objects.create(
        checkpoint=checkpoint, path="/out/_spark_metadata", kind=MetadataLog.Kind.SINK, compact_interval=10
    )
    page = browser_page

    _open(page, live_server, checkpoint, django_user_model)
    page.screenshot(path=str(SCREENSHOT_DIR / "charts_empty.png"), full_page=True)
    timeline, compact = (
        page.evaluate(SHOWN, selector) for selector in ("#batch-timeline", ".chart[id^=compact-sizes]")
    )

    assert (timeline["rendered"], timeline["ticks"], timeline["legend"]) == ("true", [], [])
    assert " ".join(timeline["words"]).startswith("No batches in this range yet: the timeline starts")
    assert (compact["rendered"], compact["ticks"], compact["legend"]) == ("true", [], [])
    assert " ".join(compact["words"]).startswith("No compact file yet: Spark writes the first, 9.compact,")
    assert page.locator("#files").inner_text().endswith("No inventory yet: the full check takes one.")
    assert "No progress received" in page.locator("#runtime").inner_text()


def test_the_files_chart_draws_every_directory_in_a_colour_its_legend_shows_and_counts_whole_files(
    browser_page, live_server, dedup_checkpoint, django_user_model
):
    page = browser_page

    _open(page, live_server, dedup_checkpoint, django_user_model)
    page.locator("#files").screenshot(path=str(SCREENSHOT_DIR / "files_chart.png"))
    look = page.evaluate(FILES_LOOK)

    legend = dict(look["legend"])
    directories = list(dedup_checkpoint.inventory.values_list("path", flat=True).distinct())
    assert sorted(legend) == sorted(path or "(root)" for path in directories)
    assert len(set(legend.values())) == len(legend)  # no two directories alike ("commits" and "state/0")
    assert set(look["lines"]) == set(legend.values())  # every line's colour is in the legend
    assert look["files_ticks"] and all(tick.replace(",", "").isdigit() for tick in look["files_ticks"])


def test_a_thousand_compactions_in_view_are_counted_bands_not_a_curtain_of_lines(
    browser_page, live_server, django_user_model
):
    checkpoint = fill_progress_history(6_000, name="compacting")  # 100 minutes of 1-second batches
    MetadataLog.objects.create(
        checkpoint=checkpoint, path="/out/_spark_metadata", kind=MetadataLog.Kind.SINK, compact_interval=6
    )
    page = browser_page

    _open(page, live_server, checkpoint, django_user_model)
    page.locator("#runtime").screenshot(path=str(SCREENSHOT_DIR / "thousand_compactions.png"))
    lanes = page.evaluate(LANE)

    for part, lane in lanes.items():
        assert lane["symbols"] <= 24 and lane["shapes"] == lane["drawn"] == lane["symbols"], part
        assert sum(int(count.replace(",", "")) for count in lane["counts"]) == 1_000, part
