"""`manage.py demo` serves static files as production does, from a real gunicorn with the demo's
environment: hashed names, Brotli and gzip copies, cached as immutable; pages gzipped."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.test import override_settings

from dashboards.management.commands.demo import collect_static, web_command, web_environment
from worker_process import free_port, wait_for

pytestmark = pytest.mark.slow  # collectstatic with Brotli, once for the module
ONE_YEAR_SECONDS = 365 * 24 * 3600
HASHED_STYLESHEET = re.compile(r'href="(/static/dashboards/css/[\w-]+\.[0-9a-f]{12}\.css)"')


@pytest.fixture(scope="module")
def static_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("demo-data") / "static"


@pytest.fixture(scope="module")
def demo_web_server(static_root: Path):
    """The demo's web server on a free port, its data (static files, SQLite) beside ``static_root``."""
    data_dir = static_root.parent
    with pytest.MonkeyPatch.context() as patch, override_settings(STATIC_ROOT=static_root):
        patch.setenv("CKPTWEB_DATA_DIR", str(data_dir))
        patch.setenv("CKPTWEB_DATABASE_URL", f"sqlite:///{data_dir / 'ckptweb.sqlite3'}")
        patch.setenv("CKPTWEB_LOG_LEVEL", "WARNING")
        environment = web_environment()
        collect_static(environment)  # looks for the manifest in settings.STATIC_ROOT
    port = free_port()
    server = subprocess.Popen(web_command(port), env=environment, cwd=settings.BASE_DIR)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(f"{base}/health/"), "the demo's gunicorn to answer /health/", timeout=60)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:  # not listening yet, or a worker still starting
        return False


def test_the_demo_pages_name_static_files_by_hash_and_the_files_are_compressed_and_cached_forever(demo_web_server):
    page = requests.get(f"{demo_web_server}/login/", headers={"Accept-Encoding": "gzip"}, timeout=10)
    stylesheet = HASHED_STYLESHEET.search(page.text)
    assert page.headers.get("Content-Encoding") == "gzip"
    assert stylesheet, f"no stylesheet under a hashed name in the login page:\n{page.text[:2000]}"

    served = requests.get(demo_web_server + stylesheet[1], headers={"Accept-Encoding": "br, gzip"}, timeout=10)
    assert served.status_code == 200
    assert served.headers["Content-Encoding"] == "br"
    cache_control = served.headers["Cache-Control"]
    assert "immutable" in cache_control
    assert int(re.search(r"max-age=(\d+)", cache_control)[1]) >= ONE_YEAR_SECONDS


def test_the_demo_serves_plotly_compressed_and_cached_forever_under_its_hashed_name(demo_web_server, static_root):
    paths = json.loads((static_root / "staticfiles.json").read_text())["paths"]
    [plotly] = [
        hashed for name, hashed in paths.items() if re.fullmatch(r"dashboards/vendor/plotly-[\w.-]+\.min\.js", name)
    ]
    assert re.fullmatch(r"dashboards/vendor/plotly-cartesian-[\d.]+\.min\.[0-9a-f]{12}\.js", plotly), plotly

    served = requests.get(f"{demo_web_server}/static/{plotly}", headers={"Accept-Encoding": "gzip"}, timeout=10)
    assert served.headers["Content-Encoding"] == "gzip"
    assert "immutable" in served.headers["Cache-Control"]
