"""The JSON API (Django REST framework): progress ingestion for the PySpark listener.

``POST /api/ingest/progress/`` with ``Authorization: Token <key>`` and the body
``{"progress": <StreamingQueryProgress.json object>}`` or, when a run is idle (Spark 3.5+'s
QueryIdleEvent), ``{"idle": {"id": ..., "runId": ..., "timestamp": ...}}``
(pipelines/progress_listener.py sends exactly these). The caller needs the
``dashboards.ingest_progress`` permission. Answers 201 for a new batch, 200 when it replaced an
earlier report of the same batch (a re-run after a restart or a resent event), 400 with the
reason when the progress cannot be read, and 429 with Retry-After beyond CKPTWEB_INGEST_RATE
requests per user (the listener retries, then spools).
"""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from dashboards.api import progress_schema
from dashboards.models import BatchProgress, QueryRun
from dashboards.query_page.runtime_series import refresh_runtime_rollups
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.progress import QueryIdleEvent, idle_event_from_dict, progress_from_dict

INGEST_SOURCE = "request body: progress"
IDLE_SOURCE = "request body: idle"


class CanIngestProgress(BasePermission):
    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.has_perm("dashboards.ingest_progress"))


class ProgressEnvelope(serializers.Serializer):
    progress = serializers.DictField(required=False, help_text="A StreamingQueryProgress as its `json` gives it.")
    idle = serializers.DictField(
        required=False,
        help_text="A QueryIdleEvent (Spark 3.5+): {id, runId, timestamp}. The run is alive and found no new data.",
    )

    def validate(self, attrs: dict) -> dict:
        if ("progress" in attrs) == ("idle" in attrs):
            raise serializers.ValidationError("send exactly one of 'progress' and 'idle'")
        return attrs


class ProgressIngestView(APIView):
    permission_classes = [CanIngestProgress]
    parser_classes = [JSONParser]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "ingest"

    @extend_schema(
        description=progress_schema.DESCRIPTION,
        request=progress_schema.REQUEST,
        responses=progress_schema.RESPONSES,
        examples=progress_schema.EXAMPLES,
    )
    def post(self, request):
        envelope = ProgressEnvelope(data=request.data)
        if not envelope.is_valid():
            return Response({"error": _first_error(envelope.errors)}, status=status.HTTP_400_BAD_REQUEST)
        try:
            if "idle" in envelope.validated_data:
                return _store_idle(idle_event_from_dict(envelope.validated_data["idle"], source=IDLE_SOURCE))
            progress = progress_from_dict(envelope.validated_data["progress"], source=INGEST_SOURCE)
        except CheckpointError as exc:
            return Response({"error": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        with transaction.atomic():
            row, created = BatchProgress.objects.store(progress, origin=BatchProgress.Origin.LISTENER)
            refresh_runtime_rollups(row.query_id, [row.batch_id])
        body = {"query_id": str(row.query.query_id), "batch_id": row.batch_id, "created": created}
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def _store_idle(event: QueryIdleEvent) -> Response:
    QueryRun.objects.record_idle(event.id, event.run_id, event.timestamp)
    return Response(
        {"query_id": event.id, "run_id": event.run_id, "idle_at": event.timestamp.isoformat()},
        status=status.HTTP_200_OK,
    )


def _first_error(errors: dict) -> str:
    field, messages = next(iter(errors.items()))
    return messages[0] if field == api_settings.NON_FIELD_ERRORS_KEY else f"{field}: {messages[0]}"
