"""A fresh web process pays its first requests' one-off costs at start-up (ckptweb/warm_up.py, run by
ckptweb/wsgi.py), so that a cold request costs what a later one does."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.cache import caches
from django.db import OperationalError
from django.db.models.sql.compiler import SQLCompiler
from django.template import engines
from django.test.signals import template_rendered
from django.urls import clear_url_caches, get_resolver, resolve, reverse

import ckptweb.warm_up as warm_up_module
import dashboards.views.query_page as query_page_views
from ckptweb.warm_up import QUERY_PAGE_VIEWS, project_template_names, warm_up, warm_up_connections, warm_up_pages
from dashboards.models.precompiled import REGISTERED
from dashboards.models.status_rows import STATUS_LIST_ROWS
from dashboards.query_page.page_version import PAGE_FIGURES_OF_ONE
from dashboards.query_page.state_panel import ROWS_FIGURES_OF_ONE
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

REPO_DIR = Path(__file__).resolve().parents[2]
DEDUP = OUR_FIXTURES / "file_source_dedup"
BODY_TEMPLATE = "dashboards/partials/query_page_body.html"


def _cached_loader():
    (loader,) = engines["django"].engine.template_loaders  # Django's cached loader, wrapping the others
    return loader


def test_warm_up_fills_the_reverse_url_lookups_and_compiles_every_project_template():
    clear_url_caches()
    _cached_loader().reset()
    assert not get_resolver()._populated and not _cached_loader().get_template_cache

    warm_up()

    assert get_resolver()._populated
    names = project_template_names()
    assert "base.html" in names and len(names) > 20, names
    cache = _cached_loader().get_template_cache
    assert [name for name in names if _cached_loader().cache_key(name) not in cache] == []


def test_a_web_process_that_has_loaded_every_view_has_not_imported_plotly_py():
    """Every figure is a plain dict: plotly.py's import and validators cost a fresh worker about a
    second and 40 MB (docs/benchmarks.md), for nothing a browser needs."""
    code = "import ckptweb.wsgi, sys; print(sorted(name for name in sys.modules if name.split('.')[0] == 'plotly'))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_DIR, capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.django_db
def test_warm_up_connections_compiles_every_precompiled_statement_in_the_thread_that_serves(monkeypatch):
    """The status facts, and the query page's version and state rows' figures (the first request of a
    fresh worker compiled those two: issue 25's cold page)."""
    assert {PAGE_FIGURES_OF_ONE, ROWS_FIGURES_OF_ONE, STATUS_LIST_ROWS} <= set(REGISTERED)
    for precompiled in REGISTERED:
        monkeypatch.setattr(precompiled, "_per_thread", threading.local())  # as in a fresh process
    compiled = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(1) or as_sql(self, *a, **k))

    warm_up_connections()
    compiled_at_warm_up = len(compiled)
    for precompiled in REGISTERED:
        precompiled.warm_up(1)  # what the requests ask, for a checkpoint that may exist

    assert compiled_at_warm_up >= len(REGISTERED)
    assert len(compiled) == compiled_at_warm_up  # the requests after it compile nothing


@pytest.mark.django_db
def test_a_database_that_does_not_answer_at_warm_up_is_left_for_the_requests(monkeypatch, caplog):
    def refuse(*_args, **_kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(STATUS_LIST_ROWS, "rows", refuse)

    warm_up_connections()  # does not raise: the worker still boots

    assert "the database did not answer (connection refused)" in caplog.text


@pytest.fixture
def synced(copy_checkpoint):
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    return checkpoint


def _rendered_during(action) -> list[str]:
    names = []

    def record(sender, template, **_kwargs):
        names.append(template.name)

    template_rendered.connect(record)
    try:
        action()
    finally:
        template_rendered.disconnect(record)
    return names


@pytest.mark.django_db
def test_warm_up_pages_serves_the_query_page_uncached_and_leaves_the_cache_as_it_was(
    synced, viewer_client, caplog, monkeypatch
):
    served = []
    monkeypatch.setattr(warm_up_module, "resolve", lambda path: served.append(path) or resolve(path))
    configured, asked = caches["default"], []
    for method in ("get", "get_many", "get_or_set", "set", "set_many", "add", "touch"):
        spied = getattr(configured, method)
        monkeypatch.setattr(
            configured, method, lambda *a, _spied=spied, _name=method, **k: asked.append(_name) or _spied(*a, **k)
        )
    caplog.set_level(logging.INFO, logger="ckptweb.warm_up")

    rendered = _rendered_during(warm_up_pages)

    assert caplog.text == ""  # every view answered 200, nothing failed
    assert served == [reverse(name, args=[synced.pk]) for name in QUERY_PAGE_VIEWS]
    assert BODY_TEMPLATE in rendered  # the page's body was built
    assert asked == []  # the configured cache was neither read nor written
    assert caches["default"] is configured
    viewer_client.get(reverse("dashboards:checkpoint-detail", args=[synced.pk]))
    assert "get_or_set" in asked  # the spy sees what the page asks of the cache


@pytest.mark.django_db
def test_warm_up_pages_without_a_checkpoint_serves_nothing(monkeypatch, caplog):
    served = []
    monkeypatch.setattr(warm_up_module, "resolve", lambda path: served.append(path) or resolve(path))

    warm_up_pages()

    assert served == [] and caplog.text == ""


@pytest.mark.django_db
def test_a_page_that_fails_at_warm_up_is_logged_and_the_worker_boots(synced, monkeypatch, caplog):
    def broken(*_args, **_kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(query_page_views, "page_version", broken)

    configured = caches["default"]

    warm_up_pages()  # does not raise

    assert "the query page did not render" in caplog.text and "server closed the connection" in caplog.text
    assert caches["default"] is configured
