"""The query page's Runtime section: what the page says about the query's progress, and the charts' JSON.

The page itself reads two rows (the newest progress, whether any state operator reported); the
charts come from one endpoint that returns every Runtime figure at once, built from the two
downsampled series and the marks, and cached per version of the progress and of the marks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.urls import reverse

from dashboards.models import BatchProgress, Checkpoint, StateOperatorMetrics
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.fragments import cached_text, cached_value
from dashboards.query_page.runtime_charts import RUNTIME_CHARTS, RuntimeChart, runtime_figures, runtime_figures_json
from dashboards.query_page.runtime_marks import Window, marks_version, runtime_marks
from dashboards.query_page.runtime_points import ProgressPoint
from dashboards.query_page.runtime_series import lag_series, operator_series, progress_series, runtime_version
from dashboards.query_page.summary_builds import SummaryBuild, runtime_batches_to_summarise


@dataclass(frozen=True, slots=True)
class RuntimeSection:
    """What the section shows: the charts to draw, or why there are none."""

    latest_batch_id: int | None  # the newest batch with progress; None: no progress received
    latest_at: datetime | None
    latest_origin: str
    batches_without_progress: int  # batches the checkpoint has past the newest progress
    charts: tuple[RuntimeChart, ...]
    building: SummaryBuild | None = None  # the build of its roll-ups under way; None: built

    @property
    def has_progress(self) -> bool:
        return self.latest_batch_id is not None


@dataclass(frozen=True, slots=True)
class _NewestProgress:
    """What the section reads of the progress, once per version of it."""

    batch_id: int
    at: datetime
    origin: str
    charts: tuple[RuntimeChart, ...]


def runtime_section(checkpoint: Checkpoint, progress_version: tuple | None = None) -> RuntimeSection:
    """The newest progress the checkpoint owns and the charts it allows, read once per
    ``progress_version`` (runtime_series.runtime_version, computed when not given)."""
    if checkpoint.query_id is None:
        return RuntimeSection(None, None, "", 0, ())
    version = runtime_version(checkpoint) if progress_version is None else progress_version
    newest = cached_value("runtime-newest", version, lambda: _newest_progress(checkpoint))
    if newest is None:
        return RuntimeSection(None, None, "", 0, ())
    behind = max(0, (checkpoint.latest_batch_id or 0) - newest.batch_id)
    building = runtime_batches_to_summarise(checkpoint)
    return RuntimeSection(newest.batch_id, newest.at, newest.origin, behind, newest.charts, building)


def _newest_progress(checkpoint: Checkpoint) -> _NewestProgress | None:
    latest = BatchProgress.objects.owned_by(checkpoint).order_by("-batch_id").first()
    if latest is None:
        return None
    return _NewestProgress(latest.batch_id, latest.timestamp, latest.get_origin_display(), _charts_of(checkpoint))


def _charts_of(checkpoint: Checkpoint) -> tuple:
    """The Runtime charts of the query: those of state only when it is stateful."""
    # Whether the query is stateful: the same for every copy of it, so the query's whole progress tells.
    has_state = StateOperatorMetrics.objects.filter(progress__query_id=checkpoint.query_id).exists()
    return tuple(chart for chart in RUNTIME_CHARTS if has_state or not chart.is_stateful)


def runtime_charts_json(checkpoint: Checkpoint, batch_range: BatchRange) -> str:
    """Every Runtime figure of the range as one JSON object by chart part, built once per version."""
    version = (*runtime_version(checkpoint), *marks_version(checkpoint), batch_range.as_query())
    return cached_text("runtime-charts", version, lambda: _build(checkpoint, batch_range))


def _build(checkpoint: Checkpoint, batch_range: BatchRange) -> str:
    progress = progress_series(checkpoint, batch_range)
    operators = operator_series(checkpoint, batch_range)
    lags = lag_series(checkpoint, batch_range)
    marks = runtime_marks(checkpoint, chart_window(progress.points, batch_range)) if progress.points else []
    figures = runtime_figures(
        progress.points,
        operators.points,
        marks,
        lags=lags.points,
        bucket_width=progress.bucket_width,
        state_bucket_width=operators.bucket_width,
        lag_bucket_width=lags.bucket_width,
        batch_link=batch_link(checkpoint),
    )
    return runtime_figures_json(figures)


def chart_window(points: list[ProgressPoint], batch_range: BatchRange) -> Window:
    """The batches the points span; their times bound the marks only where the range was cut."""
    first, last = points[0], points[-1]
    return Window(
        first.batch_id,
        last.batch_id,
        first.timestamp_ms if batch_range.first is not None else None,
        last.timestamp_ms if batch_range.last is not None else None,
    )


def batch_link(checkpoint: Checkpoint) -> str:
    """The batch page's address with ``{}`` where the batch id goes (charts.js fills it in on a click)."""
    return reverse("dashboards:batch-detail", args=[checkpoint.pk, 0]).removesuffix("0/") + "{}/"
