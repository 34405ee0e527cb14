"""Read-only endpoints about registered checkpoints; every one needs a token or a session.

A view here fetches the checkpoint through the pages' permission helper, reads one keyset page
of rows and wraps it in the freshness envelope (signature.py). The rows' queries live in the
models' QuerySets and in paging.py.
"""

from __future__ import annotations

from typing import ClassVar

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from dashboards.api.read.catchup import request_catch_up
from dashboards.api.read.paging import FreshnessParams, KeysetPage, KeysetParams, PageParams, read_keyset_page
from dashboards.api.read.serializers import (
    BatchProgressSerializer,
    BatchSerializer,
    CheckpointSerializer,
    FindingSerializer,
    MaintenanceRunSerializer,
    MetadataLogSerializer,
    StatePartitionSerializer,
)
from dashboards.api.read.signature import Freshness, freshness_of
from dashboards.api.responses import read_responses
from dashboards.models import BatchProgress, Checkpoint
from dashboards.views.pages import get_checkpoint_for_user

FRESHNESS_FIELDS = {
    "latest_batch_id": serializers.IntegerField(allow_null=True, help_text="Newest batch the server has stored."),
    "latest_committed_batch_id": serializers.IntegerField(allow_null=True),
    "signature": serializers.CharField(
        help_text="Changes whenever a sync stores a new batch or commit or reconciles a purge."
    ),
    "current": serializers.BooleanField(
        help_text="False when known_latest_batch is newer than the server's latest batch."
    ),
}
# The envelope's figures again as headers, for clients that read only the headers.
FRESHNESS_HEADERS = [
    OpenApiParameter(
        "X-Ckptweb-Latest-Batch",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=[200],
        description="latest_batch_id, empty when no batch is stored.",
    ),
    OpenApiParameter(
        "X-Ckptweb-Signature", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200], description="signature."
    ),
]


class CheckpointListParams(KeysetParams):
    # Not trimmed: the URL is matched exactly as registered.
    url = serializers.CharField(
        required=False, trim_whitespace=False, help_text="Only the checkpoint registered at this URL."
    )


def answer_freshness(checkpoint: Checkpoint, known_latest_batch: int | None) -> Freshness:
    """Tell how current the server's view is; queue a catch-up when the client knows a newer batch."""
    freshness = freshness_of(checkpoint, known_latest_batch)
    if not freshness.is_current:
        request_catch_up(checkpoint, now=timezone.now())
    return freshness


def read_params(request: Request, params_class: type[serializers.Serializer] = PageParams) -> dict:
    params = params_class(data=request.query_params)
    params.is_valid(raise_exception=True)
    return params.validated_data


def next_link(request: Request, page: KeysetPage) -> str | None:
    """The URL of the page after ``page`` (the same query, ``after`` moved on), or None on the last one."""
    return (
        None if page.next_after is None else replace_query_param(request.build_absolute_uri(), "after", page.next_after)
    )


NEXT_FIELD = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")


class CheckpointList(APIView):
    """Every registered checkpoint: its URL, its query id and the latest batch and commit stored."""

    @extend_schema(
        operation_id="v1_checkpoints_list",
        parameters=[CheckpointListParams],
        responses=read_responses(
            inline_serializer("CheckpointList", {"results": CheckpointSerializer(many=True), "next": NEXT_FIELD})
        ),
        description="Checkpoints in ascending id; follow `next` for the following page.",
    )
    def get(self, request: Request) -> Response:
        params = read_params(request, CheckpointListParams)
        checkpoints = Checkpoint.objects.select_related("query")
        if "url" in params:
            checkpoints = checkpoints.filter(url=params["url"])
        page = read_keyset_page(checkpoints, key="id", params=params)
        return Response({"results": CheckpointSerializer(page.rows, many=True).data, "next": next_link(request, page)})


class CheckpointDetail(APIView):
    """One checkpoint, with the freshness envelope (latest batch, latest commit, signature)."""

    @extend_schema(
        parameters=[FreshnessParams, *FRESHNESS_HEADERS],
        responses=read_responses(
            inline_serializer("CheckpointAnswer", {**FRESHNESS_FIELDS, "checkpoint": CheckpointSerializer()}),
            about_checkpoint=True,
        ),
    )
    def get(self, request: Request, checkpoint_id: int) -> Response:
        checkpoint = get_checkpoint_for_user(request, checkpoint_id)
        freshness = answer_freshness(checkpoint, read_params(request, FreshnessParams).get("known_latest_batch"))
        body = {**freshness.as_json(), "checkpoint": CheckpointSerializer(checkpoint).data}
        return Response(body, headers=freshness.as_headers())


class CheckpointRowsView(APIView):
    """One keyset page of a checkpoint's rows of one kind, ascending by ``key``.

    Subclasses name the key, the serializer and the rows; the paging, the envelope and the
    catch-up are the same for every kind.
    """

    key: ClassVar[str] = "id"
    serializer_class: ClassVar[type[serializers.Serializer]]
    # The Checkpoint relation holding the rows, unless rows() is overridden.
    related_name: ClassVar[str] = ""

    def rows(self, checkpoint: Checkpoint) -> QuerySet:
        return getattr(checkpoint, self.related_name).all()

    def get(self, request: Request, checkpoint_id: int) -> Response:
        checkpoint = get_checkpoint_for_user(request, checkpoint_id)
        params = read_params(request)
        freshness = answer_freshness(checkpoint, params.get("known_latest_batch"))
        page = read_keyset_page(self.rows(checkpoint), key=self.key, params=params)
        body = {
            **freshness.as_json(),
            "checkpoint_id": checkpoint.pk,
            "results": self.serializer_class(page.rows, many=True).data,
            "next": next_link(request, page),
        }
        return Response(body, headers=freshness.as_headers())


def page_schema(name: str, serializer_class: type[serializers.Serializer], key_description: str):
    """The OpenAPI description of a CheckpointRowsView subclass's answer."""
    fields = {
        **FRESHNESS_FIELDS,
        "checkpoint_id": serializers.IntegerField(),
        "results": serializer_class(many=True),
        "next": NEXT_FIELD,
    }
    return extend_schema(
        parameters=[PageParams, *FRESHNESS_HEADERS],
        responses=read_responses(inline_serializer(name, fields), about_checkpoint=True),
        description=f"Rows in ascending {key_description}; follow `next` for the following page.",
    )


@extend_schema_view(get=page_schema("BatchPage", BatchSerializer, "batch id"))
class BatchList(CheckpointRowsView):
    """The checkpoint's batches: offsets-log entry, commit, watermark and sources, by batch id."""

    key = "batch_id"
    serializer_class = BatchSerializer
    related_name = "batches"


@extend_schema_view(get=page_schema("ProgressPage", BatchProgressSerializer, "batch id"))
class ProgressList(CheckpointRowsView):
    """The runtime progress Spark reported for each batch (rows, rates, durations), by batch id."""

    key = "batch_id"
    serializer_class = BatchProgressSerializer

    def rows(self, checkpoint: Checkpoint) -> QuerySet:
        # Progress belongs to the query; a checkpoint whose metadata was never read has none, and
        # a copy stops at its own batches (CheckpointQuerySet.with_progress_owner).
        return BatchProgress.objects.owned_by(checkpoint).select_related("run")


@extend_schema_view(get=page_schema("StatePartitionPage", StatePartitionSerializer, "id"))
class StatePartitionList(CheckpointRowsView):
    """The state store partitions: provider, versions, snapshot, delta chain, files, bytes and rows."""

    serializer_class = StatePartitionSerializer
    related_name = "state_partitions"


@extend_schema_view(get=page_schema("MetadataLogPage", MetadataLogSerializer, "id"))
class MetadataLogList(CheckpointRowsView):
    """The metadata logs (file source and sink logs): compaction interval, next compaction, entries."""

    serializer_class = MetadataLogSerializer
    related_name = "metadata_logs"


@extend_schema_view(get=page_schema("FindingPage", FindingSerializer, "id"))
class OpenFindingList(CheckpointRowsView):
    """The integrity findings still open: code, severity, file and what it means for a restart."""

    serializer_class = FindingSerializer

    def rows(self, checkpoint: Checkpoint) -> QuerySet:
        return checkpoint.findings.open()


@extend_schema_view(get=page_schema("MaintenanceRunPage", MaintenanceRunSerializer, "id"))
class MaintenanceRunList(CheckpointRowsView):
    """The maintenance runs: action, status, timestamps, steps done and the size of the plan."""

    serializer_class = MaintenanceRunSerializer
    related_name = "maintenance_runs"
