"""What ``POST /api/ingest/progress/`` accepts and answers, described for the OpenAPI schema.

The serializers here only document: the request is read by
``workers.checkpoint.progress`` (the same reader as the event logs), which is the authority on
what a StreamingQueryProgress may hold. The schema test sends bodies generated from this
description to the live endpoint, so the two cannot drift apart unnoticed: a body the schema
allows must be stored, a body it forbids must be refused with 400.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, PolymorphicProxySerializer, inline_serializer
from rest_framework import serializers

from dashboards.api.responses import DETAIL, NOT_ALLOWED, NOT_SIGNED_IN, TOO_MANY_REQUESTS

# Spark's counters are Java longs (documented as int64, so generated values fit).
JAVA_LONG = {"min_value": -(2**63), "max_value": 2**63 - 1}
OPTIONAL = {"required": False, "allow_null": True}


def java_long(**kwargs) -> serializers.IntegerField:
    return serializers.IntegerField(**OPTIONAL, **JAVA_LONG, **kwargs)


def rate() -> serializers.FloatField:
    return serializers.FloatField(**OPTIONAL, help_text="Rows per second; absent when Spark reports NaN.")


def long_map(help_text: str) -> serializers.DictField:
    return serializers.DictField(child=serializers.IntegerField(**JAVA_LONG), **OPTIONAL, help_text=help_text)


def string_map() -> serializers.DictField:
    return serializers.DictField(child=serializers.CharField(allow_blank=True), **OPTIONAL)


def offset(help_text: str) -> serializers.JSONField:
    return serializers.JSONField(
        **OPTIONAL, help_text=f"{help_text}: the offset as JSON, or a string of JSON as in event logs."
    )


class SourceProgressSchema(serializers.Serializer):
    description = serializers.CharField(**OPTIONAL, allow_blank=True)
    startOffset = offset("Where the batch started")
    endOffset = offset("Where the batch ended")
    latestOffset = offset("The newest offset the source had")
    numInputRows = java_long()
    inputRowsPerSecond = rate()
    processedRowsPerSecond = rate()
    metrics = string_map()


class SinkProgressSchema(serializers.Serializer):
    description = serializers.CharField(**OPTIONAL, allow_blank=True)
    numOutputRows = java_long(help_text="-1 when the sink cannot count (v1 sinks such as the file sink).")
    metrics = string_map()


class StateOperatorProgressSchema(serializers.Serializer):
    operatorName = serializers.CharField(**OPTIONAL, allow_blank=True)
    numRowsTotal = java_long()
    numRowsUpdated = java_long()
    numRowsRemoved = java_long()
    allUpdatesTimeMs = java_long()
    allRemovalsTimeMs = java_long()
    commitTimeMs = java_long()
    memoryUsedBytes = java_long()
    numRowsDroppedByWatermark = java_long()
    numShufflePartitions = java_long()
    numStateStoreInstances = java_long()
    customMetrics = long_map("The state store provider's own counters.")


class StreamingQueryProgressSchema(serializers.Serializer):
    """StreamingQueryProgress.json as a PySpark listener gets it; fields not listed are ignored."""

    id = serializers.UUIDField(help_text="The query id (the `id` in the checkpoint's metadata file).")
    runId = serializers.UUIDField(help_text="The run id, new on every start of the query.")
    name = serializers.CharField(**OPTIONAL, allow_blank=True)
    timestamp = serializers.DateTimeField(help_text="Start of the trigger, ISO-8601 with a time zone.")
    batchId = serializers.IntegerField(**JAVA_LONG)
    batchDuration = java_long()
    durationMs = long_map("Milliseconds per phase (addBatch, walCommit, ...).")
    eventTime = serializers.DictField(
        child=serializers.DateTimeField(), **OPTIONAL, help_text="min, max, avg, watermark."
    )
    numInputRows = java_long()
    inputRowsPerSecond = rate()
    processedRowsPerSecond = rate()
    stateOperators = StateOperatorProgressSchema(many=True, **OPTIONAL)
    sources = SourceProgressSchema(many=True, **OPTIONAL)
    sink = SinkProgressSchema(**OPTIONAL)


class QueryIdleEventSchema(serializers.Serializer):
    id = serializers.UUIDField()
    runId = serializers.UUIDField()
    timestamp = serializers.DateTimeField()


class ProgressMessage(serializers.Serializer):
    progress = StreamingQueryProgressSchema()


class IdleMessage(serializers.Serializer):
    idle = QueryIdleEventSchema(help_text="Spark 3.5+: the run is alive and found no new data.")


def _answer(name: str, **fields: serializers.Field) -> serializers.Serializer:
    return inline_serializer(name, {"query_id": serializers.UUIDField(), **fields})


def _one_of(name: str, *choices: serializers.Serializer) -> PolymorphicProxySerializer:
    return PolymorphicProxySerializer(component_name=name, serializers=list(choices), resource_type_field_name=None)


PROGRESS_STORED = {"batch_id": serializers.IntegerField(), "created": serializers.BooleanField()}
# A progress Spark reported (batch 1 of the windowed aggregation fixture, trimmed): Swagger UI
# offers it, and the schema test sends it first.
PROGRESS_EXAMPLE = {
    "id": "ff1d0735-693d-429a-9ec2-c0ac91f92c73",
    "runId": "f746ab80-ce6c-469b-b122-87524ac272f8",
    "name": "windowed_agg_file_sink",
    "timestamp": "2026-11-22T04:23:42.222Z",
    "batchId": 1,
    "batchDuration": 650,
    "numInputRows": 10,
    "inputRowsPerSecond": 3.2,
    "processedRowsPerSecond": 15.4,
    "durationMs": {"addBatch": 503, "triggerExecution": 650, "walCommit": 42},
    "eventTime": {"max": "2024-01-01T00:00:02.000Z", "watermark": "2023-12-31T23:59:58.000Z"},
    "stateOperators": [
        {"operatorName": "stateStoreSave", "numRowsTotal": 3, "numRowsUpdated": 3, "memoryUsedBytes": 2104}
    ],
    "sources": [
        {
            "description": "RatePerMicroBatchStream[rowsPerBatch=10, numPartitions=2]",
            "startOffset": {"offset": 10},
            "endOffset": {"offset": 20},
            "numInputRows": 10,
            "inputRowsPerSecond": 3.2,
            "processedRowsPerSecond": 15.4,
        }
    ],
    "sink": {"description": "FileSink[file:/data/out]", "numOutputRows": -1},
}
IDLE_EXAMPLE = {
    "id": PROGRESS_EXAMPLE["id"],
    "runId": PROGRESS_EXAMPLE["runId"],
    "timestamp": "2026-11-22T04:25:00.000Z",
}

DESCRIPTION = (
    "Progress of a Spark Structured Streaming query, one trigger at a time, as the PySpark listener "
    'pipelines/progress_listener.py sends it: `{"progress": <StreamingQueryProgress.json>}`, or, when a run '
    'found no new data (Spark 3.5+), `{"idle": {id, runId, timestamp}}`. The token\'s user needs the permission '
    "dashboards.ingest_progress. A resent batch replaces its earlier report."
)
REQUEST = _one_of("ProgressEnvelope", ProgressMessage, IdleMessage)
EXAMPLES = [
    OpenApiExample("progress", value={"progress": PROGRESS_EXAMPLE}, request_only=True),
    OpenApiExample("idle", value={"idle": IDLE_EXAMPLE}, request_only=True),
]
RESPONSES = {
    200: OpenApiResponse(
        _one_of(
            "ProgressReplacedOrIdle",
            _answer("ProgressReplaced", **PROGRESS_STORED),
            _answer("IdleRecorded", run_id=serializers.UUIDField(), idle_at=serializers.DateTimeField()),
        ),
        description="The batch's earlier report was replaced, or the idle run was noted.",
    ),
    201: OpenApiResponse(
        _answer("ProgressCreated", **PROGRESS_STORED), description="A new batch's progress was stored."
    ),
    400: OpenApiResponse(
        _one_of(
            "ProgressRejected", inline_serializer("ProgressUnreadable", {"error": serializers.CharField()}), DETAIL
        ),
        description="`error`: the event is not one Spark could have written (the field and reason named); "
        "`detail`: the body is not JSON.",
    ),
    401: NOT_SIGNED_IN,
    403: NOT_ALLOWED,
    415: OpenApiResponse(DETAIL, description="The body is not sent as application/json."),
    429: TOO_MANY_REQUESTS,
}
