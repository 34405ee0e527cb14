"""A fresh web process pays its first requests' one-off costs at start-up (ckptweb/warm_up.py, run by
ckptweb/wsgi.py), so that a cold request costs what a later one does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from django.template import engines
from django.urls import clear_url_caches, get_resolver

from ckptweb.warm_up import project_template_names, warm_up

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
