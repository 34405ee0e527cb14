"""The API's front door: /api/v1/ lists its resources, /api/schema/ gives the schema, /api/docs/ shows it."""

from __future__ import annotations

import re

import pytest
import yaml
from django.contrib.staticfiles import finders
from rest_framework.authtoken.models import Token

from url_catalogue import all_url_names, reverse_with_ids

pytestmark = pytest.mark.django_db

READ_API_ROOT = "/api/v1/"
# What the docs page may load: Swagger UI's files from the installed drf-spectacular-sidecar.
SIDECAR_STATIC = "/static/drf_spectacular_sidecar/swagger-ui-dist/"
PAGE_ASSETS = re.compile(r'(?:src|href)="([^"]+)"')


@pytest.fixture
def token_headers(viewer_user) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=viewer_user).key}"}


def read_api_url_names() -> set[str]:
    """Every named route under /api/v1/ but the index itself, as Django's resolver lists them."""
    paths = {name: reverse_with_ids(name, 1) for name in all_url_names()}
    return {name for name, path in paths.items() if path.startswith(READ_API_ROOT) and path != READ_API_ROOT}


def test_the_index_lists_every_read_endpoint_and_each_listed_url_answers(client, killed_synced, token_headers):
    index = client.get(READ_API_ROOT, **token_headers).json()
    resources = {resource["name"]: resource for resource in index["resources"]}

    assert set(resources) == {name.removeprefix("api-") for name in read_api_url_names()}
    assert "batch-list" in resources and "checkpoint-list" in resources
    for resource in resources.values():
        assert resource["url"].startswith("http://testserver/api/v1/checkpoints/"), resource
        assert resource["templated"] == ("{checkpoint_id}" in resource["url"]), resource
        assert resource["description"].endswith(".") and len(resource["description"]) > 30, resource
        url = resource["url"].replace("{checkpoint_id}", str(killed_synced.pk)).removeprefix("http://testserver")
        assert client.get(url, **token_headers).status_code == 200, url


def test_the_index_links_the_schema_in_yaml_and_json_and_the_docs_page(client, viewer_user, token_headers):
    index = client.get(READ_API_ROOT, **token_headers).json()

    assert (index["schema_url"], index["docs_url"]) == ("http://testserver/api/schema/", "http://testserver/api/docs/")
    as_yaml = client.get(index["schema_url"], **token_headers)
    as_json = client.get(index["schema_json_url"], **token_headers)
    assert as_yaml["Content-Type"].startswith("application/vnd.oai.openapi")
    assert as_json["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert yaml.safe_load(as_yaml.content) == as_json.json()
    client.force_login(viewer_user)
    assert client.get(index["docs_url"]).status_code == 200


def test_the_index_and_the_schema_refuse_anonymous_callers_with_401(client):
    for url in (READ_API_ROOT, "/api/schema/", "/api/schema/?format=json"):
        answer = client.get(url)
        assert (answer.status_code, answer["WWW-Authenticate"]) == (401, "Token"), url


def test_a_signed_in_browser_session_may_read_the_index_and_the_schema(viewer_client):
    assert viewer_client.get(READ_API_ROOT).json()["title"] == "ckptweb API"
    assert viewer_client.get("/api/schema/", {"format": "json"}).json()["info"]["title"] == "ckptweb API"


def test_the_schema_documents_the_index(viewer_client):
    schema = viewer_client.get("/api/schema/", {"format": "json"}).json()

    operation = schema["paths"][READ_API_ROOT]["get"]
    assert set(operation["responses"]) == {"200", "401"}
    answer = schema["components"]["schemas"]["ApiIndex"]
    assert set(answer["properties"]) == {"title", "version", "resources", "schema_url", "schema_json_url", "docs_url"}
    resource = schema["components"]["schemas"]["Resource"]
    assert set(resource["required"]) == {"name", "url", "templated", "description"}


def test_the_docs_page_sends_anonymous_people_to_the_login_form(client):
    answer = client.get("/api/docs/")
    assert (answer.status_code, answer["Location"]) == (302, "/login/?next=/api/docs/")


def test_the_docs_page_has_the_apps_header_to_go_back_to_the_checkpoints(viewer_client):
    page = viewer_client.get("/api/docs/").content.decode()
    header = page[page.index('<header class="topbar">') : page.index("</header>")]

    assert '<a href="/">Checkpoints</a>' in header
    assert "victor" in header and "Log out" in header
    assert header and page.index("</header>") < page.index('<div id="swagger-ui">')


def test_the_docs_page_loads_swagger_ui_from_our_own_static_files_only(viewer_client):
    page = viewer_client.get("/api/docs/").content.decode()
    # The app's header links pages, not assets.
    assets = PAGE_ASSETS.findall(re.sub(r'<header class="topbar">.*</header>', "", page, flags=re.DOTALL))

    assert sorted(assets) == sorted(
        [
            *(
                SIDECAR_STATIC + name
                for name in (
                    "favicon-32x32.png",
                    "swagger-ui.css",
                    "swagger-ui-bundle.js",
                    "swagger-ui-standalone-preset.js",
                )
            ),
            "/static/dashboards/css/dashboards.css",
        ]
    )
    for asset in assets:
        assert finders.find(asset.removeprefix("/static/")), asset
    assert '"validatorUrl": null' in page
    assert 'url: "/api/schema/"' in page
