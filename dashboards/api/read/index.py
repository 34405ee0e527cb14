"""``GET /api/v1/``: the read API's front door, listing its resources and where the schema and docs are.

Each resource is read off the URL patterns of ``urls.py`` (its name, its route as a URL template)
and the first line of its view's docstring (what it holds), so a new endpoint shows up here by
being routed and documented, with nothing else to keep in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.urls import URLPattern, reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboards.api.responses import read_responses

# "<int:checkpoint_id>" in a Django route is "{checkpoint_id}" in an RFC 6570 template (and in OpenAPI).
ROUTE_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")
URL_NAME_PREFIX = "api-"


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    route: str
    description: str

    @property
    def is_templated(self) -> bool:
        return "{" in self.route


def describe_routes(patterns: list[URLPattern], *, leave_out: str) -> list[Resource]:
    """One Resource per named pattern but ``leave_out``: its URL name without the "api-" prefix,
    its route as a URL template and the first line of its view's docstring."""
    return [
        Resource(
            name=pattern.name.removeprefix(URL_NAME_PREFIX),
            route=ROUTE_PARAMETER.sub(r"{\1}", str(pattern.pattern)),
            description=_first_line(pattern.callback.view_class.__doc__),
        )
        for pattern in patterns
        if pattern.name and pattern.name != leave_out
    ]


def _first_line(docstring: str | None) -> str:
    if not docstring or not docstring.strip():
        raise ValueError("every read API view needs a docstring: its first line says what the resource holds")
    return docstring.strip().splitlines()[0]


class ResourceSerializer(serializers.Serializer):
    name = serializers.CharField(help_text='The URL name without "api-", e.g. "batch-list".')
    url = serializers.CharField(help_text="The absolute URL, or a URL template (RFC 6570) when `templated` is true.")
    templated = serializers.BooleanField(
        help_text="True when `url` has {placeholders} to fill in, such as {checkpoint_id}."
    )
    description = serializers.CharField(help_text="What the resource holds.")


class ApiIndexSerializer(serializers.Serializer):
    title = serializers.CharField()
    version = serializers.CharField()
    resources = ResourceSerializer(many=True)
    schema_url = serializers.URLField(help_text="The OpenAPI 3 schema (YAML).")
    schema_json_url = serializers.URLField(help_text="The same schema as JSON.")
    docs_url = serializers.URLField(help_text="The schema browsable in Swagger UI (needs a signed-in session).")


class ApiIndex(APIView):
    """The read API's resources, with links to its OpenAPI schema and docs page."""

    resources: list[URLPattern] = []  # the routes to list, given by urls.py

    @extend_schema(operation_id="v1_index", responses=read_responses(ApiIndexSerializer, has_parameters=False))
    def get(self, request: Request) -> Response:
        # Templates are appended after build_absolute_uri, which would percent-encode their braces.
        root = request.build_absolute_uri(reverse("api-index"))
        schema_url = request.build_absolute_uri(reverse("api-schema"))
        body = {
            "title": settings.SPECTACULAR_SETTINGS["TITLE"],
            "version": settings.SPECTACULAR_SETTINGS["VERSION"],
            "resources": [
                {"name": r.name, "url": root + r.route, "templated": r.is_templated, "description": r.description}
                for r in describe_routes(self.resources, leave_out="api-index")
            ],
            "schema_url": schema_url,
            "schema_json_url": f"{schema_url}?format=json",
            "docs_url": request.build_absolute_uri(reverse("api-docs")),
        }
        return Response(body)
