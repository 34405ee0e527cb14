"""What the query page's "building the chart summary" notice polls (workers/rollup_builds.py):
the chart's place on the page, the chart itself once its roll-ups are built."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboards.models import Checkpoint
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.runtime_section import runtime_section
from dashboards.query_page.summary_builds import timeline_batches_to_summarise
from dashboards.views.pages import get_checkpoint_for_user


def _slot(request: HttpRequest, checkpoint_id: int, template: str, context_of: Callable[[Checkpoint], dict]):
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    context = {"checkpoint": checkpoint, "chart_range": BatchRange.from_query(request.GET), **context_of(checkpoint)}
    return render(request, template, context)


@login_required
def timeline_chart_slot(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """The timeline's place on the page: the chart once its roll-ups are built, else the notice."""
    return _slot(
        request,
        checkpoint_id,
        "dashboards/partials/timeline_chart.html",
        lambda checkpoint: {"timeline_building": timeline_batches_to_summarise(checkpoint)},
    )


@login_required
def runtime_charts_slot(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """The Runtime charts' place on the page: the charts once their roll-ups are built, else the notice."""
    return _slot(
        request,
        checkpoint_id,
        "dashboards/partials/runtime_charts.html",
        lambda checkpoint: {"runtime": runtime_section(checkpoint)},
    )
