"""Pages, chart JSON and /metrics go out gzipped to a client that accepts it; the admin does not
(ckptweb/compression.py: BREACH)."""

from __future__ import annotations

import gzip
import json

import pytest
from django.urls import reverse

from factories import make_checkpoint

pytestmark = pytest.mark.django_db
GZIP = {"HTTP_ACCEPT_ENCODING": "gzip, deflate, br"}


def _unzipped(response) -> str:
    assert response.status_code == 200
    assert response.headers.get("Content-Encoding") == "gzip", response.headers
    assert "Accept-Encoding" in response.headers["Vary"]
    return gzip.decompress(response.content).decode()


def test_the_query_page_is_sent_gzipped(viewer_client):
    checkpoint = make_checkpoint(name="orders-enrichment", url="/data/orders-enrichment")

    page = _unzipped(viewer_client.get(checkpoint.get_absolute_url(), **GZIP))

    assert "orders-enrichment" in page and "csrfmiddlewaretoken" in page


def test_chart_json_is_sent_gzipped(viewer_client):
    checkpoint = make_checkpoint(name="orders-enrichment", url="/data/orders-enrichment")

    answer = _unzipped(viewer_client.get(reverse("dashboards:runtime-charts", args=[checkpoint.pk]), **GZIP))

    assert isinstance(json.loads(answer), dict)


def test_metrics_are_sent_gzipped(client):
    make_checkpoint(name="orders-enrichment", url="/data/orders-enrichment")

    exposition = _unzipped(client.get("/metrics", **GZIP))

    assert 'checkpoint="orders-enrichment"' in exposition


def test_without_accept_encoding_nothing_is_compressed(viewer_client):
    checkpoint = make_checkpoint(name="orders-enrichment", url="/data/orders-enrichment")

    response = viewer_client.get(checkpoint.get_absolute_url())

    assert "Content-Encoding" not in response.headers
    assert b"orders-enrichment" in response.content


def test_the_admin_is_never_compressed(admin_client):
    response = admin_client.get(reverse("admin:authtoken_tokenproxy_changelist"), **GZIP)

    assert response.status_code == 200
    assert "Content-Encoding" not in response.headers
