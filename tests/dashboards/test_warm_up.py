"""A fresh web process pays its first requests' one-off costs at start-up (ckptweb/warm_up.py, run by
ckptweb/wsgi.py), so that a cold request costs what a later one does."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import OperationalError
from django.db.models.sql.compiler import SQLCompiler
from django.template import engines
from django.urls import clear_url_caches, get_resolver

from ckptweb.warm_up import project_template_names, warm_up, warm_up_connections
from dashboards.models.status_rows import PROGRESS_OWNER_OF_ONE, STATUS_FACTS_OF_ONE, STATUS_LIST_ROWS

REPO_DIR = Path(__file__).resolve().parents[2]


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
def test_warm_up_connections_compiles_the_status_facts_in_the_thread_that_serves(monkeypatch):
    for precompiled in (STATUS_LIST_ROWS, STATUS_FACTS_OF_ONE, PROGRESS_OWNER_OF_ONE):
        monkeypatch.setattr(precompiled, "_per_thread", threading.local())  # as in a fresh process
    compiled = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(1) or as_sql(self, *a, **k))

    warm_up_connections()
    compiled_at_warm_up = len(compiled)
    for precompiled in (STATUS_FACTS_OF_ONE, PROGRESS_OWNER_OF_ONE):
        precompiled.rows(1)
    STATUS_LIST_ROWS.rows()

    assert compiled_at_warm_up > 0
    assert len(compiled) == compiled_at_warm_up  # the requests after it compile nothing


@pytest.mark.django_db
def test_a_database_that_does_not_answer_at_warm_up_is_left_for_the_requests(monkeypatch, caplog):
    def refuse(*_args, **_kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(STATUS_LIST_ROWS, "rows", refuse)

    warm_up_connections()  # does not raise: the worker still boots

    assert "the database did not answer (connection refused)" in caplog.text
