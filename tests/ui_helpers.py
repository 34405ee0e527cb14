"""What the UI tests share besides fixtures (the Spark tests that open a page use them too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The chromium the benches start, and their way to draw every chart (scrolled to, as a reader would).
from bench.page_load import CHROMIUM, CHROMIUM_ARGS, draw_charts  # noqa: F401
from fixture_paths import REPO_DIR

# Screenshots for a human to look at after a run (git-ignored).
SCREENSHOT_DIR = REPO_DIR / "test-artifacts"
# A name other than localhost that the browser of browser_page_at_test_host resolves to the live
# server: some pages act differently on localhost (Swagger UI asks validator.swagger.io about any other host).
TEST_HOST = "ckptweb.test"


def log_in(page, base_url: str, path: str, username: str, password: str) -> None:
    """Open ``path``, which redirects to the login form, and sign in."""
    page.goto(base_url + path)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


# How long any wait of a UI test may last (a selector, an expect, a navigation) before it fails
# naming what it waited for; Playwright's own defaults (30 s, 5 s for expect) are too short on a
# shared 2-core machine running other suites.
UI_WAIT_MS = 90_000
# Playwright's sync API runs an event loop in this thread; the ORM calls below stay synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def open_page(*extra_args: str):
    """Yield a 1400 px wide page of Debian's chromium, started with CHROMIUM_ARGS and ``extra_args``."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: the README's test command installs Debian's chromium package")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(UI_WAIT_MS)
        expect.set_options(timeout=UI_WAIT_MS)
        yield page
        browser.close()
        # Inside sync_playwright() the context variables differ, so the test's ORM calls get
        # connections of their own, which pytest-django's teardown (outside) never sees: left
        # open, they keep PostgreSQL from dropping the test database at the end of the run.
        from django.db import connections

        connections.close_all()
