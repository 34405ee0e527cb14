"""The API docs page (/api/docs/) in a real browser: Swagger UI shows every operation of the schema,
runs one with the signed-in session, and loads nothing from outside the server."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from drf_spectacular.generators import SchemaGenerator
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from ui_helpers import SCREENSHOT_DIR, TEST_HOST, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NARROW_WIDTH = 420
WAIT_MS = 60_000
SHOWN_OPERATIONS = "() => [...document.querySelectorAll('.opblock')].map(block => block.id)"


def documented_operations() -> set[str]:
    """The element id Swagger UI gives each operation of the schema: operations-<tag>-<operationId>."""
    schema = SchemaGenerator().get_schema(public=True)
    return {
        f"operations-{operation['tags'][0]}-{operation['operationId']}"
        for operations in schema["paths"].values()
        for operation in operations.values()
    }


def wait_for(locator, what: str, requested: list[str]) -> None:
    try:
        locator.wait_for(timeout=WAIT_MS)
    except PlaywrightTimeoutError:
        pytest.fail(
            f"Swagger UI did not show {what} within {WAIT_MS // 1000} s; the page requested {sorted(requested)}"
        )


def test_the_docs_page_shows_every_operation_runs_one_and_loads_nothing_from_outside(
    browser_page_at_test_host, live_server, django_user_model
):
    django_user_model.objects.create_user("reader", password="a-long-password")
    page = browser_page_at_test_host
    origin = live_server.url.replace("localhost", TEST_HOST)
    requested = []
    page.on("request", lambda request: requested.append(request.url))

    log_in(page, origin, "/api/docs/", "reader", "a-long-password")
    wait_for(page.locator("#operations-v1-v1_index"), "the operation GET /api/v1/", requested)
    shown = set(page.evaluate(SHOWN_OPERATIONS))
    page.click("#operations-v1-v1_index .opblock-summary-control")
    page.click("#operations-v1-v1_index .try-out__btn")
    page.click("#operations-v1-v1_index .execute")
    status = page.locator("#operations-v1-v1_index .live-responses-table tbody .response-col_status").first
    wait_for(status, "the status of the executed GET /api/v1/", requested)
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "api_docs.png"))
    page.set_viewport_size({"width": NARROW_WIDTH, "height": 1100})
    page.screenshot(path=str(SCREENSHOT_DIR / "api_docs_narrow.png"))

    assert shown == documented_operations() and len(shown) == 10
    assert status.inner_text().strip() == "200"
    assert {urlsplit(url).netloc for url in requested} == {urlsplit(origin).netloc}, sorted(requested)
    assert any(url.endswith("/api/schema/") for url in requested)
