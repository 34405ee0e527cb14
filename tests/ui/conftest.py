"""The real browser of the UI tests: Debian's chromium driven by Playwright (never a downloaded one)."""

from __future__ import annotations

import pytest

from ui_helpers import TEST_HOST, open_page


@pytest.fixture
def browser_page():
    yield from open_page()


@pytest.fixture
def browser_page_at_test_host(settings):
    """A page whose browser resolves TEST_HOST to this machine, which the server accepts as its name."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, TEST_HOST]
    yield from open_page(f"--host-resolver-rules=MAP {TEST_HOST} 127.0.0.1")
