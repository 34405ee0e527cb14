"""The Runtime section's chart endpoint: every figure of the section in one response."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.runtime_section import runtime_charts_json
from dashboards.query_page.summary_builds import runtime_batches_to_summarise, still_building
from dashboards.views.pages import get_checkpoint_for_user


@login_required
def runtime_charts(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    building = runtime_batches_to_summarise(checkpoint)
    if building is not None:
        return still_building(building)
    body = runtime_charts_json(checkpoint, BatchRange.from_query(request.GET))
    return HttpResponse(body, content_type="application/json")
