"""The real browser of the UI tests: Debian's chromium driven by Playwright (never a downloaded one)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# How long any wait of a UI test may last (a selector, an expect, a navigation) before it fails
# naming what it waited for; Playwright's own defaults (30 s, 5 s for expect) are too short on a
# shared 2-core machine running other suites.
UI_WAIT_MS = 90_000
# Playwright's sync API runs an event loop in this thread; the ORM calls below stay synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def browser_page():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: the README's test command installs Debian's chromium package")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
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


