"""Panels rendered once per sync (dashboards.query_page.fragments): a second request reads no batch row, and
the request after a sync that stored something shows it."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboards.query_page.fragments import cached_text, synced_version
from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(copy_checkpoint):
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    long_stateless_history(directory, batches=60)
    checkpoint = make_checkpoint(url=str(directory))
    sync_checkpoint(checkpoint.pk)
    return checkpoint, directory


def _batch_ids(client, name: str, checkpoint, query: str = "") -> tuple[list[int], list[str]]:
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse(f"dashboards:{name}", args=[checkpoint.pk]) + query).content.decode()
    batch_queries = [q["sql"] for q in queries.captured_queries if '"dashboards_batch"' in q["sql"]]
    return [int(b) for b in re.findall(r'/batches/(\d+)/">', html)], batch_queries


@pytest.mark.parametrize("name", ["batch-table-panel", "checkpoint-detail"])
def test_the_batch_table_is_read_once_per_sync_and_a_sync_that_stores_a_batch_shows_it(viewer_client, history, name):
    checkpoint, directory = history
    first, first_queries = _batch_ids(viewer_client, name, checkpoint)
    again, again_queries = _batch_ids(viewer_client, name, checkpoint)
    assert first == again == list(range(59, 9, -1))
    assert first_queries and not again_queries

    long_stateless_history(directory, batches=62)
    assert sync_checkpoint(checkpoint.pk).new_batches == 2
    checkpoint.refresh_from_db()
    after_sync, after_sync_queries = _batch_ids(viewer_client, name, checkpoint)

    assert after_sync == list(range(61, 11, -1)) and after_sync_queries


def test_each_page_of_the_table_is_its_own_text(viewer_client, history):
    checkpoint, _ = history
    newest, _ = _batch_ids(viewer_client, "batch-table-panel", checkpoint)
    older, _ = _batch_ids(viewer_client, "batch-table-panel", checkpoint, "?before=10")
    assert (newest[0], older) == (59, list(range(9, -1, -1)))


def test_a_sync_that_finds_nothing_new_still_moves_the_version(history):
    # A finding or a sync run's row may change without a new batch: the version is the sync's time.
    checkpoint, _ = history
    before = synced_version(checkpoint)
    assert cached_text("test", before, lambda: "old") == "old"
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert synced_version(checkpoint) != before
    # The text built for the old version is still served for it, and only for it.
    assert cached_text("test", before, lambda: "rebuilt") == "old"
    assert cached_text("test", synced_version(checkpoint), lambda: "new") == "new"


def test_a_text_another_release_rendered_is_not_served(tmp_path, settings):
    # A rolling deploy shares the cache: a changed partial (or module) makes a key of its own.
    import shutil

    from dashboards.query_page import fragments

    partials = tmp_path / "templates" / "dashboards" / "partials"
    shutil.copytree(settings.BASE_DIR / "templates" / "dashboards" / "partials", partials)
    settings.BASE_DIR = tmp_path
    version = ("release test", tmp_path.name)
    try:
        fragments._release.cache_clear()
        assert cached_text("test", version, lambda: "old") == "old"
        assert cached_text("test", version, lambda: "same release") == "old"
        (partials / "runs.html").write_text((partials / "runs.html").read_text() + "<!-- changed -->")
        fragments._release.cache_clear()
        assert cached_text("test", version, lambda: "new") == "new"
    finally:
        fragments._release.cache_clear()
