"""The error answers of the JSON API as the OpenAPI schema describes them, shared by every endpoint.

DRF answers 401, 403, 404, 405 and 429 with ``{"detail": "..."}`` and a refused query parameter
with 400 and ``{"<parameter>": ["<reason>", ...]}``. Declaring them per operation lets a client
(and the schema test, tests/dashboards/test_api_schema_conformance.py) tell a documented refusal
from a fault.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

DETAIL = inline_serializer("ErrorDetail", {"detail": serializers.CharField(help_text="Why the request was refused.")})
# A dict schema, not a serializer: the keys are the refused parameters' names.
PARAMETER_ERRORS = {
    "type": "object",
    "description": "The refused parameters, each with its reasons.",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}

BAD_PARAMETERS = OpenApiResponse(PARAMETER_ERRORS, description="A query parameter is not valid.")
NOT_SIGNED_IN = OpenApiResponse(
    DETAIL, description="No token or session, or an unknown token (WWW-Authenticate: Token)."
)
NOT_ALLOWED = OpenApiResponse(DETAIL, description="The token's user lacks the permission this endpoint needs.")
NO_SUCH_CHECKPOINT = OpenApiResponse(DETAIL, description="No checkpoint has this id.")
TOO_MANY_REQUESTS = OpenApiResponse(
    DETAIL, description="Beyond the rate allowed per user; Retry-After says when to try again."
)


def read_responses(ok, *, has_parameters: bool = True, about_checkpoint: bool = False) -> dict:
    """The answers of a read endpoint: ``ok`` for 200 and the refusals it can give."""
    responses = {200: ok, 401: NOT_SIGNED_IN}
    if has_parameters:
        responses[400] = BAD_PARAMETERS
    if about_checkpoint:
        responses[404] = NO_SUCH_CHECKPOINT
    return responses


def require_request_bodies(result: dict, generator, request, public) -> dict:
    """Mark every request body required (a drf-spectacular postprocessing hook).

    drf-spectacular leaves a body optional unless its serializer has required fields, which a
    oneOf of serializers (the ingest envelope) has not; but no endpoint here does anything
    useful without its body, and an empty one is refused with 400.
    """
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if "requestBody" in operation:
                operation["requestBody"]["required"] = True
    return result
