"""The batch timeline read from roll-ups (dashboards.query_page.rollups): what the timeline of a
checkpoint of any history reads instead of every batch.

Its roll-ups are kept per checkpoint in TimelineRollup, as the sync stores batches and commits
(refresh_timeline_rollups: one bucket per tier per new row), and built again from every batch by
rebuild_timeline_rollups when batches are removed, or by a worker (workers.rollup_builds) for a
checkpoint whose batches were stored before they existed: never in a request. A batch's interval
is read from the timed batch before it (one index lookup), not from a window over the rows read,
so that a bucket's extremes and the rows a roll-up names carry the same intervals whatever rows
are read with them.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F, Max, Min, OuterRef, QuerySet, Subquery

from dashboards.models import Batch, Checkpoint, TimelineRollup
from dashboards.query_page.chart_series import (
    TIMELINE_COLUMNS,
    TIMELINE_SHAPE,
    BatchRange,
    SampledSeries,
    bucket_width,
    committed_flag,
    key_span,
    timeline_point,
    windowed_timeline_series,
)
from dashboards.query_page.rollups import (
    LOWEST_TIER,
    RolledSeries,
    RollupStore,
    read_rolled,
    rebuild,
    refresh,
    within_build,
)


def batch_span(checkpoint_pk: int | None) -> tuple[int | None, int | None]:
    """The lowest and highest batch id of the checkpoint (from the unique (checkpoint, batch id) index)."""
    span = Batch.objects.filter(checkpoint_id=checkpoint_pk).aggregate(first=Min("batch_id"), last=Max("batch_id"))
    return span["first"], span["last"]


def timeline_rollup_rows(checkpoint_pk: int | None, batch_range: BatchRange) -> QuerySet:
    """The TIMELINE_SHAPE columns of the checkpoint's timed batches in the range."""
    previous_timed = (
        Batch.objects.filter(checkpoint_id=OuterRef("checkpoint_id"), batch_id__lt=OuterRef("batch_id"))
        .filter(timestamp_ms__gt=0)
        .order_by("-batch_id")
        .values("timestamp_ms")[:1]
    )
    return (
        Batch.objects.filter(checkpoint_id=checkpoint_pk, timestamp_ms__gt=0, **batch_range.lookups("batch_id"))
        .annotate(interval_ms=F("timestamp_ms") - Subquery(previous_timed), committed_flag=committed_flag())
        .values(*TIMELINE_COLUMNS)
    )


TIMELINE_ROLLUPS = RollupStore(
    TimelineRollup, "checkpoint_id", batch_span, lambda checkpoint_pk: Batch.objects.filter(checkpoint_id=checkpoint_pk)
)
TIMELINE_SERIES = RolledSeries("timeline", TIMELINE_SHAPE, timeline_rollup_rows, TIMELINE_ROLLUPS)


def refresh_timeline_rollups(checkpoint_pk: int, batch_ids: Iterable[int]) -> None:
    """Bring the timeline's roll-ups up to date with the batches (or commits) just stored for
    ``batch_ids``: their buckets, and that of the batch after each run of them, whose interval
    a batch stored behind it changes. While they are still to be built, only the batches the build
    (in chunks under the sync lease, so not now) has passed: the next chunks read the others."""
    state = Checkpoint.objects.filter(pk=checkpoint_pk).values_list(
        "timeline_rollups_built", "timeline_rollups_through"
    )
    built, through = state.first() or (False, None)
    batch_ids = within_build(sorted(set(batch_ids)), built=built, through=through)
    if batch_ids:
        after = _batches_after_runs(checkpoint_pk, batch_ids)
        refresh(TIMELINE_SERIES, checkpoint_pk, batch_ids + within_build(after, built=built, through=through))


def _batches_after_runs(checkpoint_pk: int, batch_ids: list[int]) -> list[int]:
    """The first stored batch after each run of consecutive ``batch_ids`` (an index lookup each)."""
    run_ends = [batch_id for index, batch_id in enumerate(batch_ids) if batch_ids[index + 1 :][:1] != [batch_id + 1]]
    after = []
    for end in run_ends:
        following = Batch.objects.filter(checkpoint_id=checkpoint_pk, batch_id__gt=end).order_by("batch_id")
        after.extend(following.values_list("batch_id", flat=True)[:1])
    return after


def rebuild_timeline_rollups(checkpoint_pk: int) -> None:
    """Build the timeline's roll-ups again from every batch (after batches were removed)."""
    rebuild(TIMELINE_SERIES, checkpoint_pk)


def timeline_series(checkpoint: Checkpoint, batch_range: BatchRange) -> SampledSeries:
    """Timed batches of a checkpoint (Spark 2.0-era batches with timestamp 0 cannot be placed):
    from the roll-ups at a width they keep, else (a few thousand batches) from the rows."""
    batches = checkpoint.batches.filter(**batch_range.lookups("batch_id"))
    span = key_span(batches, "batch_id")
    width = bucket_width(span, TIMELINE_SHAPE)
    if span[0] is None or width < 1 << LOWEST_TIER:
        return windowed_timeline_series(checkpoint, batches, span, width)
    rows = read_rolled(TIMELINE_SERIES, checkpoint.pk, *span, width)
    return SampledSeries([timeline_point(row) for row in rows], width)
