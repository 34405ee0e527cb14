"""The rows the batch timeline plots (short ranges here, long ones from roll-ups in
dashboards.query_page.timeline_rollups), and the machinery the chart series share.

Each series reads the key span first (MIN/MAX batch id, answered from an index) to pick a bucket
width, then one downsampling statement (dashboards.query_page.downsample): two queries whatever the number of
batches, and a downsampled series is cached until the rows move. ``?from=&to=`` narrows the batch
range; a range of at most MAX_POINTS_PER_SERIES batches comes back in full detail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db.models import Case, F, IntegerField, Max, Min, QuerySet, Value, When, Window
from django.db.models.functions import Lag

from dashboards.models import Checkpoint
from dashboards.query_page.batch_pages import batch_id_or_none
from dashboards.query_page.charts import TimelinePoint
from dashboards.query_page.downsample import MAX_POINTS_PER_SERIES, SeriesShape, bucket_width_for, select_downsampled
from dashboards.query_page.fragments import checkpoint_identity

# committed_flag makes a bucket keep one uncommitted batch (its minimum) when it has any.
TIMELINE_SHAPE = SeriesShape(key="batch_id", values=("batch_id", "interval_ms", "watermark_ms", "committed_flag"))
DOWNSAMPLED_CACHE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class BatchRange:
    """An inclusive batch id range from ``?from=&to=``; either end may be open."""

    first: int | None = None
    last: int | None = None
    only: tuple[int, ...] | None = None  # these batch ids alone (the rows a roll-up names)

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> BatchRange:
        """Read ``from`` and ``to``; a value that is not a batch id leaves that end open."""
        first, last = (batch_id_or_none(query.get(name)) for name in ("from", "to"))
        if first is not None and last is not None and first > last:
            first, last = last, first
        return cls(first, last)

    def lookups(self, key: str) -> dict[str, int]:
        bounds = {f"{key}__gte": self.first, f"{key}__lte": self.last, f"{key}__in": self.only}
        return {lookup: value for lookup, value in bounds.items() if value is not None}

    def capped_at(self, ceiling: int | None) -> BatchRange:
        """The range with its last batch at most ``ceiling`` (None: unchanged)."""
        if ceiling is None or (self.last is not None and self.last <= ceiling):
            return self
        return BatchRange(self.first, ceiling)

    def as_query(self) -> str:
        """``?from=..&to=..`` for the chart URLs, or "" for the whole history."""
        parts = [f"{name}={value}" for name, value in (("from", self.first), ("to", self.last)) if value is not None]
        return "?" + "&".join(parts) if parts else ""


@dataclass(frozen=True, slots=True)
class SampledSeries:
    points: list
    bucket_width: int  # 1: every row in the range; more: min/max of every bucket_width batches


def windowed_timeline_series(
    checkpoint: Checkpoint, batches: QuerySet, span: tuple[int | None, int | None], width: int
) -> SampledSeries:
    """The timeline of ``batches`` (a range of the checkpoint's) at ``width`` read from the rows
    themselves; dashboards.query_page.timeline_rollups.timeline_series reads longer ones from roll-ups."""

    def read(first: int, last: int) -> list[TimelinePoint]:
        # From the batch before ``first`` too, so that the first row's interval is the real one.
        rows = select_downsampled(
            timeline_rows(batches.filter(batch_id__gte=first - 1, batch_id__lte=last)), TIMELINE_SHAPE, width=width
        )
        return [timeline_point(row) for row in rows if row["batch_id"] >= first]

    # A commit is the only change to a stored batch, and Spark never commits a batch older than
    # its latest commit: the buckets up to that commit are settled.
    committed = checkpoint.latest_committed_batch_id
    # A batch left uncommitted below it (its commit file unreadable until now, say) can still be
    # committed by a reconcile: their number is part of the settled part's key.
    settled_below = span[0] if committed is None else committed + 1

    def uncommitted_below(boundary: int) -> tuple:
        return (batches.filter(is_committed=False, batch_id__lt=boundary).count(),)

    return read_settled_then_tail(
        ("timeline", *checkpoint_identity(checkpoint)), span, width, settled_below, read, uncommitted_below
    )


def timeline_point(row: Mapping[str, Any]) -> TimelinePoint:
    """The point of one row of :func:`timeline_rows`."""
    return TimelinePoint(
        row["batch_id"], row["timestamp_ms"], row["watermark_ms"], bool(row["committed_flag"]), row["interval_ms"]
    )


def timeline_rows(batches: QuerySet) -> QuerySet:
    """The TIMELINE_SHAPE columns of the timed ``batches``, with the interval since the previous one."""
    return (
        batches.filter(timestamp_ms__gt=0)
        .annotate(
            interval_ms=F("timestamp_ms") - Window(Lag("timestamp_ms"), order_by=F("batch_id").asc()),
            committed_flag=committed_flag(),
        )
        .values(*TIMELINE_COLUMNS)
    )


TIMELINE_COLUMNS = ("batch_id", "timestamp_ms", "watermark_ms", "interval_ms", "committed_flag")


def committed_flag() -> Case:
    """1 for a committed batch, else 0: a number, for the downsampling's MIN and MAX."""
    return Case(When(is_committed=True, then=Value(1)), default=Value(0), output_field=IntegerField())


def key_span(keyed: QuerySet, key: str) -> tuple[int | None, int | None]:
    """The lowest and highest key of ``keyed`` (answered from the key's index)."""
    span = keyed.aggregate(first=Min(key), last=Max(key))
    return span["first"], span["last"]


def bucket_width(
    span: tuple[int | None, int | None], shape: SeriesShape, *, max_points: int = MAX_POINTS_PER_SERIES
) -> int:
    """Keys per bucket, rounded up to a power of two: a width that moved with every new batch
    would move every bucket's boundaries, and no settled bucket could be reused."""
    first, last = span
    width = 1 if first is None else bucket_width_for(last - first + 1, len(shape.values), max_points=max_points)
    return 1 if width == 1 else 1 << (width - 1).bit_length()


def timeline_version(checkpoint: Checkpoint) -> tuple:
    """What moves when a sync changes the checkpoint's batches: a new batch, or a commit."""
    return (
        *checkpoint_identity(checkpoint),
        checkpoint.latest_batch_id,
        checkpoint.latest_committed_batch_id,
        checkpoint.uncommitted_batch_count,
    )


def read_settled_then_tail(
    key_parts: tuple,
    span: tuple[int | None, int | None],
    width: int,
    first_unsettled: int | None,  # None only with an empty span
    read: Callable[[int, int], list],
    settled_version: Callable[[int], tuple] = lambda boundary: (),
) -> SampledSeries:
    """Read a series of ``span`` as its settled buckets (cached) followed by the rest (read afresh).

    Buckets are aligned on multiples of ``width``; those wholly below ``first_unsettled``
    cannot change (``settled_version`` adds to the key what still could), so a new batch costs
    a read of the last bucket or two, not of a million rows (about 3 s on PostgreSQL). The
    settled part ends in an extra point (its last row, as a series end), a real row. Rows
    written behind a gap (a reconcile finding an out-of-order file) show once the cache entry
    times out. Full detail (width 1) is an index range: read afresh.
    """
    first, last = span
    if first is None:
        return SampledSeries([], width)
    if width == 1:
        return SampledSeries(read(first, last), width)
    boundary = max(first, min(last + 1, first_unsettled) // width * width)
    settled = []
    if boundary > first:
        parts = (*key_parts, first, boundary, width, *settled_version(boundary))
        key = "downsampled:" + ":".join(str(part) for part in parts).replace(" ", "_")
        settled = cache.get_or_set(key, lambda: read(first, boundary - 1), DOWNSAMPLED_CACHE_SECONDS)
    return SampledSeries(settled + read(boundary, last), width)
