"""A page that is not there answers 404 with the app's own page: what is missing and the way back."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/checkpoints/987654/", "/checkpoints/987654/batches/3/", "/no/such/page/"])
def test_a_missing_page_says_what_is_missing_and_links_back(viewer_client, path):
    response = viewer_client.get(path)
    page = response.content.decode()

    assert response.status_code == 404
    assert 'id="not-found"' in page and f"<code>{path}</code>" in page
    assert f'href="{reverse("dashboards:checkpoint-list")}"' in page and 'class="topbar"' in page


def test_a_missing_address_under_the_api_stays_json(viewer_client):
    response = viewer_client.get("/api/v1/no-such-thing/")

    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
