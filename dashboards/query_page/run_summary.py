"""A query's runs and how each ran, as Flink's checkpoint summary shows them; a batch against its run.

Spark gives a query a new run id at every start. Per run: when it started and was last heard of,
its batches, and min / median / p95 / max of batch duration, input rate and process rate. The
spreads are over the run's newest WINDOW_BATCHES batches (said on the page when a run has more),
read through the (run, batch_id) index, so a run of a million batches costs what one of two
thousand does. Progress past a copy's own batches, and the runs that only ran those, are the
other checkpoint's (CheckpointQuerySet.with_progress_owner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Exists, Max, Min, OuterRef

from dashboards.models import BatchProgress, Checkpoint, QueryRun
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.fragments import cached_value
from dashboards.query_page.runtime_series import runtime_version

RUNS_SHOWN = 10
WINDOW_BATCHES = 2_000
# A batch is compared with the batches of its run this far on either side.
NEIGHBOURS = 1_000


@dataclass(frozen=True, slots=True)
class Spread:
    """Min, median, 95th percentile (nearest rank) and max of some figures."""

    low: float
    median: float
    p95: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Spread | None:
        ordered = sorted(value for value in values if value is not None)
        if not ordered:
            return None
        return cls(ordered[0], nearest_rank(ordered, 0.5), nearest_rank(ordered, 0.95), ordered[-1])


def nearest_rank(ordered: Sequence[float], fraction: float) -> float:
    """The value at ``fraction`` of ``ordered`` (sorted, not empty) by the nearest-rank method."""
    return ordered[min(len(ordered), max(1, math.ceil(fraction * len(ordered)))) - 1]


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: UUID | None  # None: the batches of a chosen range, whatever their run
    started_at: datetime | None
    last_seen_at: datetime | None
    first_batch_id: int
    last_batch_id: int
    batches: int | None  # reports received; None when the run is longer than the window
    window_first_batch_id: int  # the spreads are over batches from here to last_batch_id
    duration_ms: Spread | None
    input_rate: Spread | None
    process_rate: Spread | None

    @property
    def is_windowed(self) -> bool:
        return self.window_first_batch_id > self.first_batch_id


@dataclass(frozen=True, slots=True)
class RunsSection:
    runs: list[RunSummary]
    total_runs: int
    chosen: RunSummary | None = None  # the batch range chosen for the charts, when one is
    window_batches: int = WINDOW_BATCHES


def runs_section(
    checkpoint: Checkpoint, chosen_range: BatchRange | None = None, progress_version: tuple | None = None
) -> RunsSection:
    """The checkpoint's newest RUNS_SHOWN runs, newest first, and the same figures over the batches
    of ``chosen_range`` when it bounds anything: read once per ``progress_version``
    (runtime_series.runtime_version, computed when not given). A run's start is stored with or
    before its first progress (QueryStartedEvent comes first), so its row moves with the progress."""
    if checkpoint.query_id is None:
        return RunsSection([], 0)
    version = runtime_version(checkpoint) if progress_version is None else progress_version
    chosen_query = None if chosen_range is None else chosen_range.as_query()
    key = (*version, checkpoint.progress_ceiling, chosen_query)
    return cached_value("runs-section", key, lambda: _read_runs(checkpoint, chosen_range))


def _read_runs(checkpoint: Checkpoint, chosen_range: BatchRange | None) -> RunsSection:
    """Two or three index-range queries a run."""
    progress = BatchProgress.objects.owned_by(checkpoint)
    # QueryRun.last_batch_id is the newest batch a run reported: the runs in the order they ran.
    runs = QueryRun.objects.filter(query_id=checkpoint.query_id, last_batch_id__isnull=False)
    if checkpoint.progress_ceiling is not None:
        runs = runs.filter(Exists(progress.filter(run=OuterRef("pk"))))
    newest = runs.order_by("-last_batch_id", "-pk")[:RUNS_SHOWN]
    summaries = [_summary(progress.filter(run=run), run.run_id, run.started_at) for run in newest]
    chosen = _range_summary(checkpoint, chosen_range)
    return RunsSection([summary for summary in summaries if summary is not None], runs.count(), chosen)


def _range_summary(checkpoint: Checkpoint, chosen_range: BatchRange | None) -> RunSummary | None:
    """The figures over the batches of ``chosen_range``; None when it bounds nothing."""
    if chosen_range is None or not chosen_range.as_query():
        return None
    in_range = BatchProgress.objects.filter(
        query_id=checkpoint.query_id, **chosen_range.capped_at(checkpoint.progress_ceiling).lookups("batch_id")
    )
    return _summary(in_range, None, None)


def _summary(progress, run_id: UUID | None, started_at: datetime | None) -> RunSummary | None:
    # Min and max of the indexed (run, batch_id) are its two ends: no scan of a long run.
    extent = progress.aggregate(first=Min("batch_id"), last=Max("batch_id"))
    if extent["first"] is None:
        return None
    window_first = max(extent["first"], extent["last"] - WINDOW_BATCHES + 1)
    rows = _window_rows(progress, window_first)
    started = rows[0][0] if window_first == extent["first"] else _batch_start(progress, extent["first"])
    _, durations, input_rates, process_rates = zip(*rows, strict=True)
    return RunSummary(
        run_id=run_id,
        started_at=started_at or started,
        last_seen_at=rows[-1][0],
        first_batch_id=extent["first"],
        last_batch_id=extent["last"],
        batches=len(rows) if window_first == extent["first"] else None,
        window_first_batch_id=window_first,
        duration_ms=Spread.of(durations),
        input_rate=Spread.of(input_rates),
        process_rate=Spread.of(process_rates),
    )


def _window_rows(progress, window_first: int) -> list[tuple]:
    """(start, duration, input rate, process rate) of each batch from ``window_first`` on, in order."""
    return list(
        progress.filter(batch_id__gte=window_first)
        .order_by("batch_id")
        .values_list("timestamp", "batch_duration_ms", "input_rows_per_second", "processed_rows_per_second")
    )


def _batch_start(progress, batch_id: int) -> datetime | None:
    return progress.filter(batch_id=batch_id).values_list("timestamp", flat=True).first()


@dataclass(frozen=True, slots=True)
class BatchAgainstRun:
    """How one batch compares with the batches of its run around it."""

    neighbours: int  # batches of the run compared with (this one included)
    median_duration_ms: float | None
    duration_ratio: float | None  # this batch's duration / the median
    grown_phase: str | None  # the phase (durationMs key) that took most longer than its median
    grown_phase_ms: float | None
    grown_phase_median_ms: float | None


def compare_with_run(progress: BatchProgress) -> BatchAgainstRun | None:
    """Compare a batch's duration and phases with the median of its run's batches within NEIGHBOURS."""
    if progress.run_id is None:
        return None
    rows = list(
        BatchProgress.objects.filter(
            query_id=progress.query_id,
            run_id=progress.run_id,
            batch_id__gte=progress.batch_id - NEIGHBOURS,
            batch_id__lte=progress.batch_id + NEIGHBOURS,
        ).values_list("batch_duration_ms", "duration_ms")
    )
    durations = sorted(duration for duration, _ in rows if duration is not None)
    median = nearest_rank(durations, 0.5) if durations else None
    ratio = progress.batch_duration_ms / median if median and progress.batch_duration_ms is not None else None
    phase, phase_ms, phase_median = _most_grown_phase(progress.duration_ms or {}, [phases or {} for _, phases in rows])
    return BatchAgainstRun(len(rows), median, ratio, phase, phase_ms, phase_median)


def _most_grown_phase(phases: dict, neighbours: list[dict]) -> tuple[str | None, float | None, float | None]:
    """The phase of ``phases`` furthest above its median among ``neighbours`` (None when none is above)."""
    best: tuple[str | None, float | None, float | None] = (None, None, None)
    best_growth = 0.0
    for name, value in phases.items():
        if name == "triggerExecution" or not isinstance(value, (int, float)):
            continue  # the whole batch, not a phase
        seen = sorted(other[name] for other in neighbours if isinstance(other.get(name), (int, float)))
        median = nearest_rank(seen, 0.5) if seen else 0
        if value - median > best_growth:
            best, best_growth = (name, value, median), value - median
    return best
