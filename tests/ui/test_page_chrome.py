"""What every page owes a browser besides its content: an icon that loads, a console without errors,
and form errors beside the field they are about (Debian's chromium)."""

from __future__ import annotations

import pytest

from ui_helpers import SCREENSHOT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _failures_of(page) -> list[str]:
    """Collect, as the page runs, every console error and every answer of 400 or more."""
    failures: list[str] = []
    page.on("console", lambda message: failures.append(f"console: {message.text}") if message.type == "error" else None)
    page.on(
        "response",
        lambda response: failures.append(f"{response.status} {response.url}") if response.status >= 400 else None,
    )
    return failures


def test_pages_link_an_icon_that_loads_and_favicon_ico_leads_to_it(browser_page, live_server, operator_user):
    page = browser_page
    failures = _failures_of(page)
    log_in(page, live_server.url, "/", "olivia", "operator-password")
    page.wait_for_selector("main")

    link = page.query_selector("link[rel=icon]")
    assert link is not None, "the page links no icon"
    icon = live_server.url + link.get_attribute("href")
    linked = page.request.get(icon)
    asked = page.goto(live_server.url + "/favicon.ico")

    assert (linked.status, linked.headers["content-type"]) == (200, "image/svg+xml")
    assert (asked.status, asked.url) == (200, icon)
    assert failures == []


def test_a_refused_registration_shows_the_reason_under_the_url_input_before_the_next_field(
    browser_page, live_server, operator_user, checkpoint_roots
):
    page = browser_page
    log_in(page, live_server.url, "/checkpoints/new/", "olivia", "operator-password")
    page.fill("#id_name", "orders")
    page.fill("#id_url", str(checkpoint_roots / "typo"))
    page.click("form.form button[type=submit]")
    error = page.wait_for_selector("#id_url_error")

    url_input, next_label = page.query_selector("#id_url"), page.query_selector("label[for=id_sink_log_url]")
    assert f"{(checkpoint_roots / 'typo').as_uri()}: no such file or folder" in error.inner_text()
    assert url_input.bounding_box()["y"] + url_input.bounding_box()["height"] <= error.bounding_box()["y"]
    assert error.bounding_box()["y"] + error.bounding_box()["height"] <= next_label.bounding_box()["y"]
    assert "id_url_error" in url_input.get_attribute("aria-describedby").split()
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "register_error_placement.png"), full_page=True)
