"""The real browser of the UI tests: Debian's chromium driven by Playwright (never a downloaded one)."""

from __future__ import annotations

import json

import pytest

from dashboards.models import BatchProgress
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import TEST_HOST, open_page
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint


@pytest.fixture
def browser_page():
    yield from open_page()


@pytest.fixture
def browser_page_at_test_host(settings):
    """A page whose browser resolves TEST_HOST to this machine, which the server accepts as its name."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, TEST_HOST]
    yield from open_page(f"--host-resolver-rules=MAP {TEST_HOST} 127.0.0.1")


@pytest.fixture
def dedup_checkpoint(copy_checkpoint):
    """A Spark-written file-source query, synced, with its progress: every kind of chart has data
    (its inventory names half a dozen directories)."""
    base = copy_checkpoint(OUR_FIXTURES / "file_source_dedup")
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    for progress in json.loads((base / "spark-report.json").read_text())["progress"]:
        BatchProgress.objects.store(progress_from_dict(progress, source="spark-report.json"), origin="listener")
    return checkpoint
