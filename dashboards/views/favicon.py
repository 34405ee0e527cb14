"""/favicon.ico: browsers, feed readers and crawlers ask for it whatever a page links."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static

FAVICON = "dashboards/favicon.svg"


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Send the asker to the app's icon under its static URL (hashed in production).

    Not permanent: the hashed name changes with the file, and a browser keeps a 301 for good."""
    return HttpResponseRedirect(static(FAVICON))
