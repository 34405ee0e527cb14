"""What a fresh web process would otherwise pay in its first requests, paid once at start-up.

A cold request (a fresh gunicorn worker, empty caches) should cost what any later one does
(issue 25). Measured in-process at a load average near 4 (docs/benchmarks.md): the first request
populated Django's reverse URL lookups (the gzip middleware's ``reverse``: 300 ms), compiled the
page's templates, and built plotly.py's validators on its first figure (the timeline's first
request: 740 ms, later ones 10 to 170 ms). The figures are plain dicts now: a web process does not
import plotly.py at all.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.template.loader import get_template
from django.urls import get_resolver, reverse

from ckptweb.compression import ADMIN_URL_NAME


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
