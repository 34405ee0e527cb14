"""What the query page weighs: the Plotly bundle it loads draws every trace type of our charts, and in
production every static file is served under a hashed name, compressed, and cached for a year."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest
from django.contrib.staticfiles import finders
from plotly.basedatatypes import BaseTraceType

import dashboards
from factories import make_checkpoint
from fixture_paths import REPO_DIR

PLOTLY_SRC = re.compile(r'data-plotly-src="([^"]+)"')
# How plotly.js registers a trace module; minifiers keep property names and string literals.
TRACE_REGISTRATION = re.compile(r'moduleType:"trace",name:"(\w+)"')
PLOTLY_NAME = "dashboards/vendor/plotly-cartesian-3.1.0.min.js"
ONE_YEAR_SECONDS = 365 * 24 * 3600


def _plotly_src(client) -> str:
    """The plotly.js URL the query page hands to charts.js."""
    page = client.get(make_checkpoint(url="/nowhere").get_absolute_url()).content.decode()
    sources = PLOTLY_SRC.findall(page)
    assert len(sources) == 1, sources
    return sources[0]


def _graph_objects_aliases(tree: ast.Module) -> set[str]:
    """Names under which a module imported plotly.graph_objects (``go``, usually)."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "plotly.graph_objects"}
        elif isinstance(node, ast.ImportFrom) and node.module == "plotly":
            aliases |= {a.asname or a.name for a in node.names if a.name == "graph_objects"}
    return aliases


def _trace_types_built_by_dashboards() -> set[str]:
    """The type of every trace that a module of dashboards/ builds: a trace class (go.Scatter,
    go.Heatmap, ...) or a trace written as a dict ({"type": "scatter", "x": ...}; a layout shape has x0)."""
    class_names, dict_types = set(), set()
    for module in Path(dashboards.__file__).parent.rglob("*.py"):
        tree = ast.parse(module.read_text(), filename=str(module))
        aliases = _graph_objects_aliases(tree)
        class_names |= {
            node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in aliases
        }
        dict_types |= {_dict_trace_type(node) for node in ast.walk(tree) if isinstance(node, ast.Dict)} - {None}
    classes = [getattr(go, name) for name in class_names]
    return {cls().type for cls in classes if isinstance(cls, type) and issubclass(cls, BaseTraceType)} | dict_types


def _dict_trace_type(node: ast.Dict) -> str | None:
    """The "type" of a dict literal that has an "x" as well (a trace), else None."""
    entries = {
        key.value: value for key, value in zip(node.keys, node.values, strict=True) if isinstance(key, ast.Constant)
    }
    kind = entries.get("type")
    return kind.value if "x" in entries and isinstance(kind, ast.Constant) else None


@pytest.mark.django_db
def test_the_plotly_bundle_of_the_query_page_registers_every_trace_type_our_charts_draw(viewer_client):
    bundle = finders.find(_plotly_src(viewer_client).removeprefix("/static/"))
    registered = set(TRACE_REGISTRATION.findall(Path(bundle).read_text()))

    drawn = _trace_types_built_by_dashboards()
    assert {"scatter", "heatmap"} <= drawn  # what charts.py draws today: the scan found it
    assert drawn <= registered, f"{Path(bundle).name} lacks {sorted(drawn - registered)}"


def test_the_vendored_plotly_bundle_has_its_licence_beside_it():
    bundle = Path(finders.find(PLOTLY_NAME))

    assert "MIT License" in (bundle.parent / "plotly-cartesian-3.1.0.LICENSE").read_text()
    assert bundle.read_text()[:200].count("plotly.js (cartesian - minified) v3.1.0") == 1


def test_the_vendored_plotly_bundle_is_of_the_release_line_the_plotly_package_writes_figures_for():
    # plotly.py writes figure JSON for the plotly.js it ships (3.1.1 with plotly 6.3.1); a new minor
    # or major release of plotly.py wants the partial bundle of that release vendored with it.
    from plotly.offline import get_plotlyjs_version

    header = Path(finders.find(PLOTLY_NAME)).read_text()[:200]
    vendored = re.search(r"plotly\.js \(cartesian - minified\) v(\d+)\.(\d+)\.\d+", header).groups()

    assert vendored == tuple(get_plotlyjs_version().split(".")[:2])


@pytest.fixture(scope="module")
def production_static_root(tmp_path_factory) -> Path:
    """STATIC_ROOT after `manage.py collectstatic` with the production settings (CKPTWEB_DEBUG=false)."""
    data_dir = tmp_path_factory.mktemp("data")
    environment = {
        **os.environ,
        "CKPTWEB_DEBUG": "false",
        "CKPTWEB_SECRET_KEY": "test-only",
        "CKPTWEB_DATA_DIR": str(data_dir),
    }
    environment.pop("CKPTWEB_DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity=0"],
        cwd=REPO_DIR,
        env=environment,
        check=True,
        timeout=600,
    )
    return data_dir / "static"


@pytest.mark.slow  # collectstatic with Brotli, once per module
def test_collectstatic_in_production_writes_hashed_names_with_gzip_and_brotli_copies(production_static_root):
    import json

    manifest = json.loads((production_static_root / "staticfiles.json").read_text())["paths"]
    hashed = manifest[PLOTLY_NAME]

    assert re.fullmatch(r"dashboards/vendor/plotly-cartesian-3\.1\.0\.min\.[0-9a-f]{12}\.js", hashed)
    for suffix in (".gz", ".br"):
        assert (production_static_root / (hashed + suffix)).stat().st_size < 600_000, suffix


@pytest.fixture
def production_static(settings, production_static_root):
    """Serve what collectstatic wrote, as the production settings do (no finders, no re-reading)."""
    settings.STATIC_ROOT = production_static_root
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    settings.WHITENOISE_USE_FINDERS = settings.WHITENOISE_AUTOREFRESH = False


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_production_sends_the_query_pages_plotly_compressed_and_cached_for_a_year(
    production_static, viewer_client, encoding
):
    src = _plotly_src(viewer_client)
    assert re.fullmatch(r"/static/dashboards/vendor/plotly-cartesian-3\.1\.0\.min\.[0-9a-f]{12}\.js", src)

    response = viewer_client.get(src, headers={"accept-encoding": encoding})

    assert response.status_code == 200
    assert response["Content-Encoding"] == encoding
    cache_control = dict((part.strip().split("=") + [""])[:2] for part in response["Cache-Control"].split(","))
    assert "immutable" in cache_control and int(cache_control["max-age"]) >= ONE_YEAR_SECONDS
    assert int(response["Content-Length"]) < 600_000


@pytest.mark.django_db
def test_production_serves_the_api_docs_page_with_swagger_ui_under_hashed_names(production_static, viewer_client):
    page = viewer_client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)

    # The favicon, the stylesheet and the two scripts of drf-spectacular-sidecar; our stylesheet for the header.
    assert len(assets) == 5
    for asset in assets:
        assert re.fullmatch(
            r"/static/(drf_spectacular_sidecar/swagger-ui-dist|dashboards/css)/[\w.-]+\.[0-9a-f]{12}\.(js|css|png)",
            asset,
        ), asset
        assert viewer_client.get(asset).status_code == 200, asset


def _follow_favicon(client) -> tuple[str, int, str, bytes]:
    """Where /favicon.ico (asked for by browsers and tools whatever a page links) sends the asker, and
    what answers there."""
    response = client.get("/favicon.ico")
    assert response.status_code == 302, response.status_code
    icon = client.get(response["Location"])
    return response["Location"], icon.status_code, icon["Content-Type"], b"".join(icon.streaming_content)


@pytest.mark.django_db
def test_favicon_ico_leads_to_the_svg_icon_in_debug_mode(client):
    location, status, content_type, body = _follow_favicon(client)

    assert (location, status, content_type) == ("/static/dashboards/favicon.svg", 200, "image/svg+xml")
    assert body.startswith(b"<svg ")


@pytest.mark.slow
@pytest.mark.django_db
def test_favicon_ico_leads_to_the_hashed_svg_icon_in_production(production_static, client):
    location, status, content_type, body = _follow_favicon(client)

    assert re.fullmatch(r"/static/dashboards/favicon\.[0-9a-f]{12}\.svg", location), location
    assert (status, content_type) == (200, "image/svg+xml")
    assert body.startswith(b"<svg ")
