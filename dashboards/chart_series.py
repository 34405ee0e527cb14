"""The rows the batch timeline and state-metrics charts plot, downsampled in the database when long.

Each series reads the key span first (MIN/MAX batch id, answered from an index) to pick a bucket
width, then one downsampling statement (dashboards.downsample): two queries whatever the number of
batches, and a downsampled series is cached until the rows move. ``?from=&to=`` narrows the batch
range; a range of at most MAX_POINTS_PER_SERIES batches comes back in full detail.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import (
    Case,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Lag, NullIf

from .batch_pages import batch_id_or_none
from .charts import StatePoint, TimelinePoint
from .downsample import SeriesShape, bucket_width_for, select_downsampled
from .models import (
    CACHE_HITS,
    CACHE_MISSES,
    BatchProgress,
    Checkpoint,
    StateOperatorMetrics,
)

# committed_flag makes a bucket keep one uncommitted batch (its minimum) when it has any.
TIMELINE_SHAPE = SeriesShape(key="batch_id", values=("batch_id", "interval_ms", "watermark_ms", "committed_flag"))
STATE_SHAPE = SeriesShape(
    key="batch_id", values=("num_rows_total", "memory_used_bytes", "cache_hit_ratio"), partition="operator_index"
)
DOWNSAMPLED_CACHE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class BatchRange:
    """An inclusive batch id range from ``?from=&to=``; either end may be open."""

    first: int | None = None
    last: int | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> BatchRange:
        """Read ``from`` and ``to``; a value that is not a batch id leaves that end open."""
        first, last = (batch_id_or_none(query.get(name)) for name in ("from", "to"))
        if first is not None and last is not None and first > last:
            first, last = last, first
        return cls(first, last)

    def lookups(self, key: str) -> dict[str, int]:
        bounds = {f"{key}__gte": self.first, f"{key}__lte": self.last}
        return {lookup: value for lookup, value in bounds.items() if value is not None}

    def as_query(self) -> str:
        """``?from=..&to=..`` for the chart URLs, or "" for the whole history."""
        parts = [f"{name}={value}" for name, value in (("from", self.first), ("to", self.last)) if value is not None]
        return "?" + "&".join(parts) if parts else ""


@dataclass(frozen=True, slots=True)
class SampledSeries:
    points: list
    bucket_width: int  # 1: every row in the range; more: min/max of every bucket_width batches


def timeline_series(checkpoint: Checkpoint, batch_range: BatchRange) -> SampledSeries:
    """Timed batches of a checkpoint (Spark 2.0-era batches with timestamp 0 cannot be placed)."""
    batches = checkpoint.batches.filter(**batch_range.lookups("batch_id"))
    span = _key_span(batches, "batch_id")
    width = _bucket_width(span, TIMELINE_SHAPE)

    def read() -> list[TimelinePoint]:
        return [
            TimelinePoint(row["batch_id"], row["timestamp_ms"], row["watermark_ms"], bool(row["committed_flag"]), row["interval_ms"])
            for row in select_downsampled(timeline_rows(batches), TIMELINE_SHAPE, width=width)
        ]

    # A new batch moves the span; a commit moves one of these. Nothing else in a batch's offset or
    # commit log entry changes once written, so a sync that found nothing keeps the cached series.
    version = (checkpoint.latest_committed_batch_id, checkpoint.uncommitted_batch_count)
    return _read_cached_if_downsampled(("timeline", *_identity(checkpoint), *span, *version), width, read)


def timeline_rows(batches: QuerySet) -> QuerySet:
    """The TIMELINE_SHAPE columns of the timed ``batches``, with the interval since the previous one."""
    return batches.filter(timestamp_ms__gt=0).annotate(
        interval_ms=F("timestamp_ms") - Window(Lag("timestamp_ms"), order_by=F("batch_id").asc()),
        committed_flag=Case(When(is_committed=True, then=Value(1)), default=Value(0), output_field=IntegerField()),
    ).values("batch_id", "timestamp_ms", "watermark_ms", "interval_ms", "committed_flag")


def state_metrics_series(checkpoint: Checkpoint, batch_range: BatchRange) -> SampledSeries:
    """Every stateful operator's figures per reported batch of the checkpoint's query, one series per operator."""
    progress = BatchProgress.objects.filter(query_id=checkpoint.query_id, **batch_range.lookups("batch_id"))
    span = _key_span(progress, "batch_id")
    width = _bucket_width(span, STATE_SHAPE)
    # Progress arrives with new batch ids, which move the span's end.
    key = ("state", *_identity(checkpoint), *span)
    return _read_cached_if_downsampled(key, width, lambda: _read_state_points(checkpoint.query_id, batch_range, width))


def _read_state_points(query_id: int | None, batch_range: BatchRange, width: int) -> list[StatePoint]:
    hits, misses = (Cast(KT(f"custom_metrics__{name}"), FloatField()) for name in (CACHE_HITS, CACHE_MISSES))
    rows = StateOperatorMetrics.objects.filter(progress__query_id=query_id, **batch_range.lookups("progress__batch_id")).values(
        "operator_index", "operator_name", "num_rows_total", "memory_used_bytes",
        batch_id=F("progress__batch_id"), cache_hits=hits, cache_misses=misses,
        cache_hit_ratio=hits / NullIf(hits + misses, Value(0.0)),
    )
    return [
        StatePoint(
            row["batch_id"], row["operator_index"], row["operator_name"], row["num_rows_total"], row["memory_used_bytes"],
            _count_or_none(row["cache_hits"]), _count_or_none(row["cache_misses"]),
        )
        for row in select_downsampled(rows, STATE_SHAPE, width=width)
    ]


def _key_span(keyed: QuerySet, key: str) -> tuple[int | None, int | None]:
    """The lowest and highest key of ``keyed`` (answered from the key's index)."""
    span = keyed.aggregate(first=Min(key), last=Max(key))
    return span["first"], span["last"]


def _bucket_width(span: tuple[int | None, int | None], shape: SeriesShape) -> int:
    first, last = span
    return 1 if first is None else bucket_width_for(last - first + 1, len(shape.values))


def _identity(checkpoint: Checkpoint) -> tuple:
    # created_at as well as the pk: a pk may be reused (a test database, a restored dump).
    return checkpoint.pk, checkpoint.created_at.timestamp()


def _read_cached_if_downsampled(key_parts: tuple, width: int, read: Callable[[], list]) -> SampledSeries:
    """Read a full-detail series (cheap: an index range) afresh, a downsampled one through the cache.

    At a million batches a downsampled series costs about a second of database time, and every open
    query page asks again every 30 s; the key holds what moves when rows are added, and the timeout
    bounds what it cannot see (a restarted query reporting an old batch's progress again).
    """
    if width == 1:
        return SampledSeries(read(), width)
    key = "downsampled:" + ":".join(str(part) for part in (*key_parts, width)).replace(" ", "_")
    return SampledSeries(cache.get_or_set(key, read, DOWNSAMPLED_CACHE_SECONDS), width)


def _count_or_none(value: float | None) -> int | None:
    # The JSON counters are cast to float for the ratio in SQL; they are whole numbers.
    return None if value is None else int(value)
