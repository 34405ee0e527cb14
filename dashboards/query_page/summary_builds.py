"""Whether a chart's roll-ups are still being built (workers.rollup_builds), of how many batches,
and how far the build is.

A checkpoint or query whose history was stored before its roll-ups existed has them built by
workers, in chunks; until the last chunk its charts say so, and poll, instead of reading every row
in the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpResponse, JsonResponse

from dashboards.models import Checkpoint, StreamingQuery
from dashboards.query_page.rollups import progress_span
from dashboards.query_page.timeline_rollups import batch_span


@dataclass(frozen=True, slots=True)
class SummaryBuild:
    """A build under way: the batch ids its history spans, and how many of them it has passed."""

    batches: int
    summarised: int


def timeline_batches_to_summarise(checkpoint: Checkpoint) -> SummaryBuild | None:
    """None when the timeline's roll-ups are built; else how many batches the build reads (the
    span's two ends: two index lookups) and has read."""
    if checkpoint.timeline_rollups_built:
        return None
    through = Checkpoint.objects.filter(pk=checkpoint.pk).values_list("timeline_rollups_through", flat=True)
    return _build_of(batch_span(checkpoint.pk), through.first())


def runtime_batches_to_summarise(checkpoint: Checkpoint) -> SummaryBuild | None:
    """None when the Runtime charts' roll-ups of the checkpoint's query are built (or it has no query)."""
    query = StreamingQuery.objects.filter(pk=checkpoint.query_id, rollups_built=False)
    state = query.values_list("rollups_through", flat=True)
    if checkpoint.query_id is None or not state:
        return None
    return _build_of(progress_span(checkpoint.query_id), state[0])


def _build_of(span: tuple[int | None, int | None], through: int | None) -> SummaryBuild:
    first, last = span
    if first is None:
        return SummaryBuild(0, 0)
    passed = 0 if through is None else min(through, last) - first + 1
    return SummaryBuild(last - first + 1, max(0, passed))


POLL_SECONDS = 5


def still_building(build: SummaryBuild) -> HttpResponse:
    """A chart endpoint's answer while the roll-ups are built: 503, ask again (no raw rows read)."""
    response = JsonResponse(
        {"error": f"building the chart summary of {build.batches:,} batches…", "summarised": build.summarised},
        status=503,
    )
    response["Retry-After"] = str(POLL_SECONDS)
    return response
