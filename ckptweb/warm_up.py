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
(bench/cold_charts.py, docs/benchmarks.md).
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connections
from django.template.loader import get_template
from django.urls import get_resolver, reverse

from ckptweb.compression import ADMIN_URL_NAME

logger = logging.getLogger(__name__)
# An id no checkpoint has: the one-checkpoint statements are compiled and run, and find nothing.
NO_SUCH_CHECKPOINT = -1


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
    """Open the database and cache connections the first request would, and compile and run the
    status facts every page reads (the database reads those tables' catalogs). A database that is
    down or not migrated yet, or a cache that does not answer, is left for the requests to report."""
    from dashboards.models.status_rows import PROGRESS_OWNER_OF_ONE, STATUS_FACTS_OF_ONE, STATUS_LIST_ROWS

    try:
        STATUS_LIST_ROWS.rows()
        STATUS_FACTS_OF_ONE.rows(NO_SUCH_CHECKPOINT)
        PROGRESS_OWNER_OF_ONE.rows(NO_SUCH_CHECKPOINT)
    except DatabaseError as error:
        logger.warning("web process warm-up: the database did not answer (%s); the first request will", error)
        connections.close_all()
    try:
        cache.get("ckptweb:warm-up")
    except Exception as error:  # noqa: BLE001  (whatever the cache backend raises: its requests will report it)
        logger.warning("web process warm-up: the cache did not answer (%s); the first request will", error)
