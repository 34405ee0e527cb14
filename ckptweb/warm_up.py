"""What a fresh web process would otherwise pay in its first requests, paid once at start-up.

A cold request (a fresh gunicorn worker, empty caches) should cost what any later one does
(issue 25). Measured in-process at a load average near 4 (docs/benchmarks.md): the first request
populated Django's reverse URL lookups (the gzip middleware's ``reverse``: 300 ms), compiled the
page's templates, and built plotly.py's validators on its first figure (the timeline's first
request: 740 ms, later ones 10 to 170 ms). The figures are plain dicts now: a web process does not
import plotly.py at all. Then the connections (warm_up_connections): a fresh worker's first request
of any page also opened the database and cache connections, had a new PostgreSQL backend read the
catalogs of the tables it touched, and compiled the status facts' SQL (dashboards/models/
precompiled.py): the health panel's first request took 31 ms and the next ones 12 ms
(bench/cold_charts.py, docs/benchmarks.md). Then the pages (warm_up_pages): the first query page
and chart of a fresh worker still cost 15 to 40 ms more than the same request once the process had
served one, its caches emptied (the first run of each view's code and statements; the database
backend reading the catalogs of the twenty tables they touch), so the worker serves the query page
and what it asks for once, for one checkpoint, with no cache, before its first request.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache, caches
from django.core.cache.backends.dummy import DummyCache
from django.core.handlers.wsgi import WSGIRequest
from django.db import DatabaseError, connections
from django.template.loader import get_template
from django.urls import get_resolver, resolve, reverse

from ckptweb.compression import ADMIN_URL_NAME

logger = logging.getLogger(__name__)
# An id no checkpoint has: the one-checkpoint statements are compiled and run, and find nothing.
NO_SUCH_CHECKPOINT = -1
# What a browser asks for when it opens a query page: the page, its panels and its charts.
QUERY_PAGE_VIEWS = (
    "dashboards:checkpoint-detail",
    "dashboards:checkpoint-health-panel",
    "dashboards:batch-table-panel",
    "dashboards:batch-timeline-chart",
    "dashboards:runtime-charts",
    "dashboards:state-heatmap-chart",
    "dashboards:inventory-growth-chart",
)


def warm_up() -> None:
    """Load the URLconf and its reverse lookups, and compile every project template."""
    _ = get_resolver().url_patterns  # the attribute access is what loads the URLconf (every view module)
    reverse(ADMIN_URL_NAME)  # fills the reverse lookups of every URL name and namespace
    for name in project_template_names():
        get_template(name)


def project_template_names() -> list[str]:
    """Every template under the TEMPLATES dirs, as a view names it."""
    names = []
    for directory in (Path(d) for engine in settings.TEMPLATES for d in engine.get("DIRS", ())):
        names += [path.relative_to(directory).as_posix() for path in sorted(directory.rglob("*.html"))]
    return names


def warm_up_connections() -> None:
    """Open the database and cache connections the first request would, and compile and run every
    precompiled statement the pages read (the status facts, the query page's version; the database
    reads those tables' catalogs). A database that is down or not migrated yet, or a cache that does
    not answer, is left for the requests to report."""
    from dashboards.models.precompiled import REGISTERED

    try:
        for statement in REGISTERED:
            statement.warm_up(NO_SUCH_CHECKPOINT)
    except DatabaseError as error:
        logger.warning("web process warm-up: the database did not answer (%s); the first request will", error)
        connections.close_all()
    try:
        cache.get("ckptweb:warm-up")
    except Exception as error:  # noqa: BLE001  (whatever the cache backend raises: its requests will report it)
        logger.warning("web process warm-up: the cache did not answer (%s); the first request will", error)


def warm_up_pages() -> None:
    """Serve the query page and what it asks for once, for the most recently synced checkpoint, as
    a superuser that exists only here, with no cache: nothing is read from a cache (the code runs
    as a cold request's would) and nothing is left in one (a value of this run is not what the
    first visitor then reads warm). Without checkpoints there is nothing to warm; whatever goes
    wrong is logged and left for the requests."""
    from dashboards.models import Checkpoint

    try:
        checkpoint_id = Checkpoint.objects.active().order_by("-last_synced_at").values_list("pk", flat=True).first()
        if checkpoint_id is None:
            return
        allowed = settings.ALLOWED_HOSTS[0] if settings.ALLOWED_HOSTS else "*"
        host = "localhost" if "*" in allowed else allowed.lstrip(".")  # ".example.com" allows example.com
        user = get_user_model()(username="warm-up", is_active=True, is_staff=True, is_superuser=True)
        with _no_cache():
            for name in QUERY_PAGE_VIEWS:
                _serve(reverse(name, args=[checkpoint_id]), host, user)
    except Exception as error:  # noqa: BLE001  (a warm-up that fails must not stop the worker's boot)
        logger.warning("web process warm-up: the query page did not render (%r); the first request will", error)
        connections.close_all()  # a connection the error left broken is not the first request's


def _serve(path: str, host: str, user) -> None:
    """The view of ``path`` called as the URLconf resolves it for ``user``, without the middleware (no session)."""
    request = WSGIRequest(
        {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": path,
            "SERVER_NAME": host,
            "SERVER_PORT": "80",
            "HTTP_HOST": host,
            "wsgi.input": io.BytesIO(),
            "wsgi.url_scheme": "http",
        }
    )
    request.user = user
    match = resolve(path)
    response = match.func(request, *match.args, **match.kwargs)
    if response.status_code != 200:
        logger.info("web process warm-up: %s answered %s", path, response.status_code)


@contextmanager
def _no_cache() -> Iterator[None]:
    """The default cache is Django's dummy one (gets miss, sets are dropped) within, in this thread."""
    configured = caches["default"]
    caches["default"] = DummyCache("warm-up", {})
    try:
        yield
    finally:
        caches["default"] = configured
