"""Error answers for URLs that match no route (Django's handler404, set in ckptweb/urls.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Answer JSON under /api/, as the API's own 404s do ({"detail": ...}); the usual page elsewhere."""
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
