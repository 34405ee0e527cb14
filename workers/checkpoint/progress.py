"""StreamingQueryProgress and the StreamingQueryListener events, from either JSON shape Spark writes.

A progress object describes one trigger (batch) of one query run (``progress.scala``). It comes
in two shapes, both read here into the same dataclasses:

* ``StreamingQueryProgress.json`` (what ``query.lastProgress`` and a PySpark listener's
  ``event.progress.json`` give): offsets are JSON values (Spark parses each offset string),
  ``numInputRows``, ``inputRowsPerSecond`` and ``processedRowsPerSecond`` are present at the top
  (sums over the sources; rates rounded to one decimal in 4.x), maps have sorted keys, and
  empty maps and NaN rates are left out.
* The Jackson shape inside event logs (``QueryProgressEvent``'s ``progress``): offsets are
  strings holding JSON (``"{\\"offset\\":6}"``), the three derived top-level values are absent,
  empty maps are ``{}``, NaN rates may appear as the string ``"NaN"``, and 4.3 adds fields such
  as ``snapshotCustomMetricNames``.

Unknown fields are ignored and missing optional ones are None, so progress from Spark 2.1 to 4.x
reads. ``id``, ``runId``, ``batchId`` and ``timestamp`` are required: they tie a progress to a
batch of a checkpoint (query id = the ``id`` in the checkpoint's ``metadata``). Offsets are kept
as compact JSON text (the Jackson strings re-serialised the same way), so both shapes give
equal values. ``numOutputRows`` stays -1 where Spark reports "unknown" (v1 sinks such as the
file sink).

Listener events in event logs are one JSON object per line whose ``Event`` names the class:
``org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent`` (id, runId, name,
timestamp), ``$QueryProgressEvent`` (progress) and ``$QueryTerminatedEvent`` (id, runId,
exception, errorClassOnException). ``$QueryIdleEvent`` (3.5+) carries no batch: it tells that
the run is alive with no new data. Spark 2.0.x wrote ``$QueryProgress``/``$QueryTerminated``
with a ``queryInfo`` object and, in 2.0.2, the current class names with a ``queryStatus``
object: those carry a session-local integer query id and, before 2.0.2, no batch id at all, so
they can never be matched with a checkpoint's batches and are skipped as well.
"""

from __future__ import annotations

import json
import math
import reprlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .lag import SourceLag, source_lag
from .logfile import (
    JsonSite,
    decode_text,
    get_object,
    get_optional_long,
    get_required_long,
    get_required_str,
    get_str,
    parse_json_object,
)

LISTENER_EVENT_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
QUERY_STARTED_EVENT = LISTENER_EVENT_PREFIX + "QueryStartedEvent"
QUERY_PROGRESS_EVENT = LISTENER_EVENT_PREFIX + "QueryProgressEvent"
QUERY_TERMINATED_EVENT = LISTENER_EVENT_PREFIX + "QueryTerminatedEvent"
QUERY_IDLE_EVENT = LISTENER_EVENT_PREFIX + "QueryIdleEvent"

# Spark 2.0.x: objects describing the query instead of a progress (see the module docstring).
_SPARK_2_0_KEYS = ("queryInfo", "queryStatus")
# Jackson writes NaN and infinite doubles as these strings (WRITE_NAN_AS_STRINGS).
_NON_FINITE_STRINGS = frozenset({"NaN", "Infinity", "-Infinity"})


@dataclass(frozen=True, slots=True)
class SourceProgress:
    """What one source read in a trigger; offsets are compact JSON text, or None when absent."""

    description: str | None
    start_offset: str | None
    end_offset: str | None
    latest_offset: str | None
    num_input_rows: int | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    metrics: dict[str, str]
    lag: SourceLag  # derived from latestOffset, endOffset and metrics (see lag.py)


@dataclass(frozen=True, slots=True)
class SinkProgress:
    """What the sink wrote in a trigger; ``num_output_rows`` is -1 when Spark does not know."""

    description: str | None
    num_output_rows: int | None
    metrics: dict[str, str]


@dataclass(frozen=True, slots=True)
class StateOperatorProgress:
    """One stateful operator's state store metrics for a trigger, summed over its partitions.

    ``custom_metrics`` holds the provider's metrics: ``loadedMapCacheHitCount``,
    ``loadedMapCacheMissCount``, ``stateOnCurrentVersionSizeBytes`` (HDFS), ``rocksdb*`` (RocksDB).
    """

    operator_name: str | None
    num_rows_total: int | None
    num_rows_updated: int | None
    all_updates_time_ms: int | None
    num_rows_removed: int | None
    all_removals_time_ms: int | None
    commit_time_ms: int | None
    memory_used_bytes: int | None
    num_rows_dropped_by_watermark: int | None
    num_shuffle_partitions: int | None
    num_state_store_instances: int | None
    custom_metrics: dict[str, int]


@dataclass(frozen=True, slots=True)
class StreamingQueryProgress:
    """The progress of one trigger of a query run (Spark's StreamingQueryProgress).

    ``id`` is the query id kept across restarts (the checkpoint's), ``run_id`` changes with every
    start. ``duration_ms`` maps phases (addBatch, walCommit, triggerExecution, ...) to
    milliseconds; ``event_time`` maps min/max/avg/watermark to UTC datetimes.
    """

    id: str
    run_id: str
    name: str | None
    timestamp: datetime
    batch_id: int
    batch_duration_ms: int | None
    duration_ms: dict[str, int]
    num_input_rows: int | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    event_time: dict[str, datetime]
    state_operators: tuple[StateOperatorProgress, ...]
    sources: tuple[SourceProgress, ...]
    sink: SinkProgress | None

    @property
    def watermark(self) -> datetime | None:
        """The event-time watermark the trigger ran with, if the query has one."""
        return self.event_time.get("watermark")


@dataclass(frozen=True, slots=True)
class QueryStartedEvent:
    """A query run started; ``timestamp`` is absent before Spark 3.1."""

    id: str
    run_id: str
    name: str | None
    timestamp: datetime | None


@dataclass(frozen=True, slots=True)
class QueryProgressEvent:
    """A trigger finished; see ``progress``."""

    progress: StreamingQueryProgress


@dataclass(frozen=True, slots=True)
class QueryTerminatedEvent:
    """A query run stopped, with the exception text when it failed."""

    id: str
    run_id: str
    exception: str | None
    error_class_on_exception: str | None


@dataclass(frozen=True, slots=True)
class QueryIdleEvent:
    """A running query found no new data (Spark 3.5+ posts this instead of an empty progress,
    at most every spark.sql.streaming.noDataProgressEventInterval)."""

    id: str
    run_id: str
    timestamp: datetime


ListenerEvent = QueryStartedEvent | QueryProgressEvent | QueryTerminatedEvent | QueryIdleEvent


def parse_streaming_query_progress(data: bytes, *, source: str) -> StreamingQueryProgress:
    """Parse a progress JSON document (``StreamingQueryProgress.json`` or the event-log shape).

    Raises CorruptFileError naming ``source`` and the field when the document is not a progress.
    """
    site = JsonSite(source, "progress", 0)
    return _progress(parse_json_object(decode_text(data, source=source), site), site)


def progress_from_dict(fields: dict[str, Any], *, source: str) -> StreamingQueryProgress:
    """Read an already decoded progress object, e.g. the ``progress`` of an ingest request."""
    site = JsonSite(source, "progress")
    if not isinstance(fields, dict):
        raise site.error(f"expected a JSON object, found {reprlib.repr(fields)}")
    return _progress(fields, site)


def idle_event_from_dict(fields: dict[str, Any], *, source: str) -> QueryIdleEvent:
    """Read an already decoded QueryIdleEvent (id, runId, timestamp), e.g. the ``idle`` of an ingest request."""
    site = JsonSite(source, "idle event")
    if not isinstance(fields, dict):
        raise site.error(f"expected a JSON object, found {reprlib.repr(fields)}")
    return _idle_event(fields, site)


def _idle_event(fields: dict[str, Any], site: JsonSite) -> QueryIdleEvent:
    return QueryIdleEvent(
        id=_uuid(fields, "id", site),
        run_id=_uuid(fields, "runId", site),
        timestamp=_timestamp(get_required_str(fields, "timestamp", site), "timestamp", site),
    )


def listener_event_from_dict(fields: dict[str, Any], site: JsonSite) -> ListenerEvent | None:
    """Read one decoded event-log event; None for events that are not about query progress.

    Raises CorruptFileError (through ``site``) when a started, progress or terminated event is
    malformed.
    """
    kind = fields.get("Event")
    if any(key in fields for key in _SPARK_2_0_KEYS):
        return None
    if kind == QUERY_PROGRESS_EVENT:
        progress_site = JsonSite(site.source, f"{site.what}: progress", site.offset)
        progress = get_object(fields, "progress", site)
        if progress is None:
            raise site.error("a QueryProgressEvent without its 'progress' object")
        return QueryProgressEvent(_progress(progress, progress_site))
    if kind == QUERY_STARTED_EVENT:
        return QueryStartedEvent(
            id=_uuid(fields, "id", site),
            run_id=_uuid(fields, "runId", site),
            name=get_str(fields, "name", site),
            timestamp=_optional_timestamp(fields, "timestamp", site),
        )
    if kind == QUERY_IDLE_EVENT:
        return _idle_event(fields, site)
    if kind == QUERY_TERMINATED_EVENT:
        return QueryTerminatedEvent(
            id=_uuid(fields, "id", site),
            run_id=_uuid(fields, "runId", site),
            exception=get_str(fields, "exception", site),
            error_class_on_exception=get_str(fields, "errorClassOnException", site),
        )
    return None


# --- the progress object ------------------------------------------------------------------------


def _progress(fields: dict[str, Any], site: JsonSite) -> StreamingQueryProgress:
    sources = tuple(_source(entry, site) for entry in _objects(fields, "sources", site))
    sink = get_object(fields, "sink", site)
    return StreamingQueryProgress(
        id=_uuid(fields, "id", site),
        run_id=_uuid(fields, "runId", site),
        name=get_str(fields, "name", site),
        timestamp=_timestamp(get_required_str(fields, "timestamp", site), "timestamp", site),
        batch_id=get_required_long(fields, "batchId", site),
        batch_duration_ms=get_optional_long(fields, "batchDuration", site),
        duration_ms=_long_map(fields, "durationMs", site),
        **_input_totals(fields, site, sources),
        event_time=_event_time(fields, site),
        state_operators=tuple(_state_operator(entry, site) for entry in _objects(fields, "stateOperators", site)),
        sources=sources,
        sink=None if sink is None else _sink(sink, site),
    )


def _input_totals(fields: dict[str, Any], site: JsonSite, sources: tuple[SourceProgress, ...]) -> dict[str, Any]:
    """The query's input rows and rates: its own fields, else the sum over its sources (_total)."""
    return {
        "num_input_rows": _total(fields, "numInputRows", site, get_optional_long, [s.num_input_rows for s in sources]),
        "input_rows_per_second": _total(
            fields, "inputRowsPerSecond", site, _rate, [s.input_rows_per_second for s in sources]
        ),
        "processed_rows_per_second": _total(
            fields, "processedRowsPerSecond", site, _rate, [s.processed_rows_per_second for s in sources]
        ),
    }


def _source(fields: dict[str, Any], site: JsonSite) -> SourceProgress:
    end_offset, latest_offset = _offset_text(fields.get("endOffset")), _offset_text(fields.get("latestOffset"))
    metrics = _string_map(fields, "metrics", site)
    return SourceProgress(
        description=get_str(fields, "description", site),
        start_offset=_offset_text(fields.get("startOffset")),
        end_offset=end_offset,
        latest_offset=latest_offset,
        num_input_rows=get_optional_long(fields, "numInputRows", site),
        input_rows_per_second=_rate(fields, "inputRowsPerSecond", site),
        processed_rows_per_second=_rate(fields, "processedRowsPerSecond", site),
        metrics=metrics,
        lag=source_lag(latest_offset, end_offset, metrics, JsonSite(site.source, f"{site.what}: source", site.offset)),
    )


def _sink(fields: dict[str, Any], site: JsonSite) -> SinkProgress:
    return SinkProgress(
        description=get_str(fields, "description", site),
        num_output_rows=get_optional_long(fields, "numOutputRows", site),
        metrics=_string_map(fields, "metrics", site),
    )


def _state_operator(fields: dict[str, Any], site: JsonSite) -> StateOperatorProgress:
    def long_field(key: str) -> int | None:
        return get_optional_long(fields, key, site)

    return StateOperatorProgress(
        operator_name=get_str(fields, "operatorName", site),
        num_rows_total=long_field("numRowsTotal"),
        num_rows_updated=long_field("numRowsUpdated"),
        all_updates_time_ms=long_field("allUpdatesTimeMs"),
        num_rows_removed=long_field("numRowsRemoved"),
        all_removals_time_ms=long_field("allRemovalsTimeMs"),
        commit_time_ms=long_field("commitTimeMs"),
        memory_used_bytes=long_field("memoryUsedBytes"),
        num_rows_dropped_by_watermark=long_field("numRowsDroppedByWatermark"),
        num_shuffle_partitions=long_field("numShufflePartitions"),
        num_state_store_instances=long_field("numStateStoreInstances"),
        custom_metrics=_long_map(fields, "customMetrics", site),
    )


def _event_time(fields: dict[str, Any], site: JsonSite) -> dict[str, datetime]:
    texts = _string_map(fields, "eventTime", site)
    return {key: _timestamp(text, f"eventTime.{key}", site) for key, text in texts.items()}


def _offset_text(value: Any) -> str | None:
    """Return an offset as compact JSON text, whichever shape it came in.

    The JSON shape holds the parsed offset (or the raw string when Spark could not parse it);
    the Jackson shape holds the string Spark's source wrote. Re-serialising parsed JSON keeps
    the key order, so both shapes give the same text.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return value  # not JSON: Spark shows such offsets as plain strings too
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _total(fields: dict[str, Any], key: str, site: JsonSite, read, per_source: list) -> Any:
    """Return a top-level total as written, or, in the Jackson shape that leaves it out, the sum
    over the sources that Spark defines it as (None when a source has none, e.g. a NaN rate)."""
    if key in fields:
        return read(fields, key, site)
    return None if any(value is None for value in per_source) else sum(per_source)


# --- typed field access: every mismatch is a CorruptFileError naming the field --------------------


def _rate(fields: dict[str, Any], key: str, site: JsonSite) -> float | None:
    """Return a rate in rows per second; None when absent, NaN or infinite."""
    value = fields.get(key)
    if value is None or (isinstance(value, str) and value in _NON_FINITE_STRINGS):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise site.error(f"{key!r} must be a number, found {reprlib.repr(value)}")
    return float(value) if math.isfinite(value) else None


def _uuid(fields: dict[str, Any], key: str, site: JsonSite) -> str:
    """Return a required id field; Spark's query and run ids are java.util.UUIDs, written as text."""
    text = get_required_str(fields, key, site)
    try:
        uuid.UUID(text)
    except ValueError:
        raise site.error(f"{key!r} is not a UUID: {reprlib.repr(text)}") from None
    return text


def _timestamp(text: str, key: str, site: JsonSite) -> datetime:
    """Parse Spark's ISO-8601 UTC timestamps such as ``2024-01-01T00:00:04.000Z``; other offsets are turned to UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise site.error(f"{key!r} is not an ISO-8601 timestamp: {reprlib.repr(text)}") from None
    if moment.tzinfo is None:
        raise site.error(f"{key!r} has no time zone: {reprlib.repr(text)}")
    try:
        # In UTC, as Spark writes them: databases take offsets of at most about 15 hours
        # (PostgreSQL), ISO-8601 allows 23:59, and a moment outside years 1-9999 in UTC fits neither.
        return moment.astimezone(UTC)
    except OverflowError:
        raise site.error(f"{key!r} is outside years 1-9999 in UTC: {reprlib.repr(text)}") from None


def _optional_timestamp(fields: dict[str, Any], key: str, site: JsonSite) -> datetime | None:
    text = get_str(fields, key, site)
    return None if text is None else _timestamp(text, key, site)


def _objects(fields: dict[str, Any], key: str, site: JsonSite) -> list[dict[str, Any]]:
    """Return a list of JSON objects, [] when absent or null."""
    value = fields.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise site.error(f"{key!r} must be a list of JSON objects, found {reprlib.repr(value)}")
    return value


def _long_map(fields: dict[str, Any], key: str, site: JsonSite) -> dict[str, int]:
    entries = get_object(fields, key, site) or {}
    map_site = JsonSite(site.source, f"{site.what}: {key}", site.offset)
    return {name: get_required_long(entries, name, map_site) for name in entries}


def _string_map(fields: dict[str, Any], key: str, site: JsonSite) -> dict[str, str]:
    entries = get_object(fields, key, site) or {}
    map_site = JsonSite(site.source, f"{site.what}: {key}", site.offset)
    return {name: get_required_str(entries, name, map_site) for name in entries}
