"""GET /metrics: the Prometheus exposition of the store, optionally behind a bearer token."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder

from dashboards.metrics.collector import REGISTRY


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text (or OpenMetrics when asked for); 401 without the token when one is set."""
    if not _has_metrics_token(request):
        response = HttpResponse(
            "A bearer token is required: Authorization: Bearer <CKPTWEB_METRICS_TOKEN>\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="ckptweb metrics"'
        return response
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(REGISTRY), content_type=content_type)


def _has_metrics_token(request: HttpRequest) -> bool:
    expected = settings.METRICS_TOKEN
    if not expected:
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected.encode())
