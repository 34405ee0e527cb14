"""The rows the Runtime charts plot: every reported batch's progress and state operators, downsampled in SQL.

As the batch timeline series (dashboards.query_page.chart_series): the key span first, then one
downsampling statement per series, the settled buckets cached. The query-wide series keeps each
bucket's extremes of the rates, the input rows, the batch duration and the watermark gap (the
phases are drawn stacked, so the batch duration is their envelope); the operator series keeps
those of every state figure, per operator; the lag series those of the offsets behind head, per
source that reports them. Times are read as epoch milliseconds in SQL, so the
raw downsampling cursor returns plain numbers on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import BigIntegerField, Case, F, FloatField, Func, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, NullIf

from dashboards.models import (
    CACHE_HITS,
    CACHE_MISSES,
    BatchProgress,
    Checkpoint,
    SourceLagMetrics,
    StateOperatorMetrics,
    StreamingQuery,
)
from dashboards.query_page.chart_series import BatchRange, SampledSeries, bucket_width, key_span
from dashboards.query_page.downsample import SeriesShape, select_downsampled
from dashboards.query_page.fragments import checkpoint_identity
from dashboards.query_page.rollups import LOWEST_TIER, RolledSeries, read_rolled, rebuild, refresh, within_build
from dashboards.query_page.runtime_points import LagPoint, OperatorPoint, ProgressPoint

PROGRESS_SHAPE = SeriesShape(
    key="batch_id",
    values=(
        "input_rows_per_second",
        "processed_rows_per_second",
        "num_input_rows",
        "batch_duration_ms",
        "watermark_gap_ms",
    ),
)
OPERATOR_SHAPE = SeriesShape(
    key="batch_id",
    values=(
        "num_rows_total",
        "num_rows_updated",
        "num_rows_removed",
        "num_rows_dropped_by_watermark",
        "memory_used_bytes",
        "cache_hit_ratio",
    ),
    partition="operator_index",
)
LAG_SHAPE = SeriesShape(key="batch_id", values=("offsets_behind",), partition="source_index")
# Points per series: the Runtime charts are half the page wide, and nine of them share one response.
RUNTIME_MAX_POINTS = 1_000
# Spark reports the watermark as 1970-01-01T00:00:00Z until the first batch has set one.
NO_WATERMARK = datetime(1970, 1, 1, tzinfo=UTC)


class EpochMillis(Func):
    """Milliseconds since 1970 of a timestamp column, as an integer."""

    output_field = BigIntegerField()
    template = "CAST(ROUND(EXTRACT(EPOCH FROM %(expressions)s) * 1000) AS BIGINT)"

    def as_sqlite(self, compiler, connection, **extra_context):
        # Django keeps SQLite datetimes as UTC text; julianday's double is exact to about 50 microseconds.
        template = "CAST(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400000.0) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra_context)


def rolled_series() -> tuple[RolledSeries, ...]:
    """The Runtime chart series kept in roll-ups."""
    return (
        RolledSeries("runtime-progress", PROGRESS_SHAPE, progress_rows),
        RolledSeries("runtime-operators", OPERATOR_SHAPE, operator_rows),
        RolledSeries("runtime-lags", LAG_SHAPE, lag_rows),
    )


def refresh_runtime_rollups(query_pk: int, batch_ids: Iterable[int]) -> None:
    """Bring the Runtime charts' roll-ups up to date with the progress just stored for ``batch_ids``
    (in the caller's transaction); while they are still to be built, only those the build has passed
    (workers.rollup_builds builds them in chunks; the next chunks read the others).

    The query's row stays locked until the caller commits, and a chunk of the build locks it before
    it reads rows: a chunk either waits and finds these rows committed, or has committed its
    progress before and this call refreshes what it passed."""
    with transaction.atomic():  # the caller's, where it stored the rows (a savepoint in it)
        state = StreamingQuery.objects.select_for_update().filter(pk=query_pk)
        built, through = state.values_list("rollups_built", "rollups_through").first() or (False, None)
        batch_ids = within_build(batch_ids, built=built, through=through)
        for series in rolled_series():
            refresh(series, query_pk, batch_ids)


def rebuild_runtime_rollups(query_pk: int) -> None:
    """Build the Runtime charts' roll-ups of a query again from all its progress (after rows were removed)."""
    for series in rolled_series():
        rebuild(series, query_pk)


def progress_series(checkpoint: Checkpoint, batch_range: BatchRange) -> SampledSeries:
    """The query-wide figures of every reported batch of the checkpoint's query in the range."""
    return _sampled(checkpoint, batch_range, "runtime-progress", PROGRESS_SHAPE, progress_rows, _progress_point)


def operator_series(checkpoint: Checkpoint, batch_range: BatchRange) -> SampledSeries:
    """Every stateful operator's figures per reported batch of the checkpoint's query, one series per operator."""
    return _sampled(
        checkpoint, batch_range, "runtime-operators", OPERATOR_SHAPE, operator_rows, lambda row: OperatorPoint(**row)
    )


def lag_series(checkpoint: Checkpoint, batch_range: BatchRange) -> SampledSeries:
    """How far each source that reports it was behind its head, per reported batch of the checkpoint's query."""
    return _sampled(checkpoint, batch_range, "runtime-lags", LAG_SHAPE, lag_rows, lambda row: LagPoint(**row))


def _sampled(
    checkpoint: Checkpoint,
    batch_range: BatchRange,
    kind: str,
    shape: SeriesShape,
    rows: Callable[[int | None, BatchRange], QuerySet],
    point: Callable[[dict], object],
) -> SampledSeries:
    """Downsample ``rows`` of the checkpoint's query in ``shape``: from the roll-ups at a width
    they keep, else (a range of at most ~3,000 batches) from the rows themselves."""
    batch_range = batch_range.capped_at(checkpoint.progress_ceiling)
    progress = BatchProgress.objects.filter(query_id=checkpoint.query_id, **batch_range.lookups("batch_id"))
    span = key_span(progress, "batch_id")
    width = bucket_width(span, shape, max_points=RUNTIME_MAX_POINTS)
    if span[0] is None:
        return SampledSeries([], width)
    if width >= 1 << LOWEST_TIER:
        series = RolledSeries(kind, shape, rows)
        return SampledSeries([point(row) for row in read_rolled(series, checkpoint.query_id, *span, width)], width)
    downsampled = select_downsampled(rows(checkpoint.query_id, BatchRange(*span)), shape, width=width)
    return SampledSeries([point(row) for row in downsampled], width)


def progress_rows(query_id: int | None, batch_range: BatchRange) -> QuerySet:
    """The PROGRESS_SHAPE columns of the query's progress, with the start time and the phases."""
    started = EpochMillis("timestamp")
    return BatchProgress.objects.filter(query_id=query_id, **batch_range.lookups("batch_id")).values(
        "batch_id",
        "input_rows_per_second",
        "processed_rows_per_second",
        "num_input_rows",
        "batch_duration_ms",
        "duration_ms",
        timestamp_ms=started,
        watermark_gap_ms=Case(When(watermark__gt=NO_WATERMARK, then=started - EpochMillis("watermark")), default=None),
    )


def _progress_point(row: dict) -> ProgressPoint:
    phases = row["duration_ms"]
    # The raw cursor returns JSON columns as text on both backends.
    return ProgressPoint(
        batch_id=row["batch_id"],
        timestamp_ms=row["timestamp_ms"],
        input_rows_per_second=row["input_rows_per_second"],
        processed_rows_per_second=row["processed_rows_per_second"],
        num_input_rows=row["num_input_rows"],
        batch_duration_ms=row["batch_duration_ms"],
        duration_ms=json.loads(phases) if isinstance(phases, str) else (phases or {}),
        watermark_gap_ms=row["watermark_gap_ms"],
    )


def operator_rows(query_id: int | None, batch_range: BatchRange) -> QuerySet:
    """The OPERATOR_SHAPE columns of every operator of the query's progress, with the batch start time."""
    hits, misses = (Cast(KT(f"custom_metrics__{name}"), FloatField()) for name in (CACHE_HITS, CACHE_MISSES))
    return StateOperatorMetrics.objects.filter(
        progress__query_id=query_id, **batch_range.lookups("progress__batch_id")
    ).values(
        "operator_index",
        "operator_name",
        "num_rows_total",
        "num_rows_updated",
        "num_rows_removed",
        "num_rows_dropped_by_watermark",
        "memory_used_bytes",
        batch_id=F("progress__batch_id"),
        timestamp_ms=EpochMillis("progress__timestamp"),
        cache_hit_ratio=hits / NullIf(hits + misses, Value(0.0)),
    )


def lag_rows(query_id: int | None, batch_range: BatchRange) -> QuerySet:
    """The LAG_SHAPE column of every source that reported its lag, with the batch start time."""
    return SourceLagMetrics.objects.filter(
        progress__query_id=query_id, offsets_behind__isnull=False, **batch_range.lookups("progress__batch_id")
    ).values(
        "source_index",
        "description",
        "offsets_behind",
        batch_id=F("progress__batch_id"),
        timestamp_ms=EpochMillis("progress__timestamp"),
    )


def runtime_version(checkpoint: Checkpoint) -> tuple:
    """What moves when progress arrives: the span of its batch ids (one index lookup)."""
    progress = BatchProgress.objects.owned_by(checkpoint)
    return (*checkpoint_identity(checkpoint), checkpoint.query_id, *key_span(progress, "batch_id"))
