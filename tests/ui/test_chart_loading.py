"""A real browser shows the query page before plotly.js has arrived, and drawing the charts moves nothing."""

from __future__ import annotations

import pytest

from ui_helpers import SCREENSHOT_DIR, draw_charts, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHART_BOXES = """() => Object.fromEntries([...document.querySelectorAll('.chart')].map(el => [el.id, {
    height: el.getBoundingClientRect().height,
    placeholder: getComputedStyle(el, '::before').content,
    rendered: el.dataset.rendered || null,
}]))"""


def test_the_query_page_is_shown_with_chart_placeholders_while_plotly_is_loading_and_nothing_moves_when_drawn(
    browser_page, live_server, dedup_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    page = browser_page
    held = []
    page.route("**/plotly-cartesian-*.js", lambda route: held.append(route))  # answered once the page was looked at

    log_in(page, live_server.url, dedup_checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.locator("#batch-table").wait_for()
    page.wait_for_function("() => document.readyState !== 'loading'")
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "charts_loading.png"), full_page=True)
    waiting = page.evaluate(CHART_BOXES)
    for route in held:
        route.continue_()
    draw_charts(page)
    drawn = page.evaluate(CHART_BOXES)

    assert len(held) == 1
    assert sorted(waiting) == sorted(drawn) and len(drawn) >= 6  # timeline, heatmap, state metrics, 2 logs, files
    assert {chart: box["placeholder"] for chart, box in waiting.items()} == {
        chart: '"Loading chart…"' for chart in drawn
    }
    assert {chart: box["rendered"] for chart, box in drawn.items()} == {chart: "true" for chart in drawn}
    assert {chart: box["height"] for chart, box in drawn.items()} == {
        chart: box["height"] for chart, box in waiting.items()
    }


def test_a_chart_says_so_when_plotly_cannot_be_loaded(browser_page, live_server, dedup_checkpoint, django_user_model):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    page = browser_page
    page.route("**/plotly-cartesian-*.js", lambda route: route.fulfill(status=404))

    log_in(page, live_server.url, dedup_checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.wait_for_selector("#batch-timeline[data-rendered]")

    assert page.get_attribute("#batch-timeline", "data-rendered") == "error"
    assert page.inner_text("#batch-timeline").startswith(
        "Chart could not be loaded: plotly.js could not be loaded from /static/"
    )


def test_a_chart_below_the_fold_is_fetched_and_drawn_only_when_scrolled_to(
    browser_page, live_server, dedup_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    page = browser_page
    chart_requests = []
    page.on("request", lambda request: chart_requests.append(request.url) if "/charts/" in request.url else None)

    log_in(page, live_server.url, dedup_checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.wait_for_selector("#batch-timeline[data-rendered=true]")
    page.wait_for_load_state("networkidle")
    growth = page.locator("#inventory-growth")
    below_by_px = page.evaluate("(el) => el.getBoundingClientRect().top - window.innerHeight", growth.element_handle())
    growth_url = live_server.url + growth.get_attribute("data-chart-url")
    before = {"rendered": growth.get_attribute("data-rendered"), "requested": growth_url in chart_requests}

    growth.scroll_into_view_if_needed()
    page.wait_for_function("(el) => el.dataset.rendered", arg=growth.element_handle())

    assert below_by_px > 1000, "the file-growth chart should start well below the first screen"
    assert before == {"rendered": None, "requested": False}
    assert growth.get_attribute("data-rendered") == "true"
    assert chart_requests.count(growth_url) == 1


DRAW_ORDER = """
window.__drawn = [];
new MutationObserver((changes) => changes.forEach((change) => window.__drawn.push(change.target.id)))
  .observe(document, {subtree: true, attributes: true, attributeFilter: ["data-rendered"]});
"""
TWO_FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
CHARTS_BY_PLACE = """() => [...document.querySelectorAll('.chart')].map((el) => {
    const box = el.getBoundingClientRect();
    const inView = box.top < window.innerHeight && box.bottom > 0;
    return [el.id, inView ? "on" : box.top < window.innerHeight + 600 ? "near" : "far"];
})"""


def test_the_charts_in_view_are_drawn_before_those_only_near_it_which_are_drawn_without_scrolling(
    browser_page, live_server, dedup_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    page = browser_page
    page.add_init_script(DRAW_ORDER)
    page.set_viewport_size({"width": 1400, "height": 800})  # the timeline in view, the Runtime charts near
    held = []
    page.route("**/charts/timeline.json*", lambda route: held.append(route))  # the chart in view answers last

    with page.expect_response(lambda response: "/charts/runtime.json" in response.url):
        log_in(page, live_server.url, dedup_checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.wait_for_function("() => window.Plotly")
    page.evaluate(TWO_FRAMES)  # time enough to draw what had all it needs
    drawn_while_held = page.evaluate("() => window.__drawn.slice()")
    places = dict(page.evaluate(CHARTS_BY_PLACE))
    for route in held:
        route.continue_()
    near = [chart for chart, place in places.items() if place == "near"]
    page.wait_for_function("(ids) => ids.every((id) => document.getElementById(id).dataset.rendered)", arg=near)
    drawn = page.evaluate("() => window.__drawn")
    on_screen = [chart for chart, place in places.items() if place == "on"]

    assert len(held) == 1 and on_screen and near, places
    assert drawn_while_held == []
    assert sorted(drawn[: len(on_screen)]) == sorted(on_screen), drawn
    assert set(near) <= set(drawn) and not {chart for chart in drawn if places[chart] == "far"}, drawn
    assert {page.get_attribute(f"#{chart}", "data-rendered") for chart in on_screen + near} == {"true"}


STARTED_BEFORE_DOM_READY = """(fragment) => {
    const ready = performance.getEntriesByType("navigation")[0].domContentLoadedEventStart;
    return performance.getEntriesByType("resource").filter((entry) => entry.name.includes(fragment))
        .map((entry) => entry.startTime < ready);
}"""


def test_plotly_and_the_timelines_figure_are_asked_for_while_the_page_is_parsed_and_asked_for_once(
    browser_page, live_server, dedup_checkpoint, django_user_model
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    page = browser_page
    requested = []
    page.on("request", lambda request: requested.append(request.url))

    log_in(page, live_server.url, dedup_checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.wait_for_selector("#batch-timeline[data-rendered=true]")
    timeline = live_server.url + page.get_attribute("#batch-timeline", "data-chart-url")

    # Before DOMContentLoaded, i.e. before charts.js (a deferred script) could ask for either.
    assert page.evaluate(STARTED_BEFORE_DOM_READY, "/charts/timeline.json") == [True]
    assert page.evaluate(STARTED_BEFORE_DOM_READY, "/plotly-cartesian-") == [True]
    # charts.js took the preloaded answers: one request each.
    assert requested.count(timeline) == 1
    assert len([url for url in requested if "/plotly-cartesian-" in url]) == 1
