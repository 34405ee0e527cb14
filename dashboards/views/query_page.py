"""The query page and the two panels it polls: fetch, gather, render.

The sections below the overview come rendered once per page version (dashboards/query_page/
page_body.py); what this gathers per request is the overview (the status, recent syncs) and the
slots: everything that says how long ago.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone

from dashboards.health.query_status import Thresholds, assess
from dashboards.models import Checkpoint
from dashboards.query_page.as_of import (
    AsOf,
    find_read,
    full_pass_as_of,
    next_full_pass_at,
    probe_pass_as_of,
    state_read,
    sync_as_of,
)
from dashboards.query_page.batch_pages import BatchPageRequest
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.page_body import PageBody, page_body
from dashboards.query_page.page_sections import PageRequest, batch_table_html, build_page_body
from dashboards.query_page.page_version import PageVersion, page_version
from dashboards.query_page.summary_builds import timeline_batches_to_summarise
from dashboards.views.pages import get_checkpoint_for_user

RECENT_SYNC_RUNS = 10


@login_required
def checkpoint_detail(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id, with_status_facts=True)
    version = page_version(checkpoint)
    if version is None:  # removed since
        raise Http404(f"No checkpoint {checkpoint_id}")
    page_request = _page_request(request)
    timeline_building = timeline_batches_to_summarise(checkpoint)
    build = partial(build_page_body, checkpoint, version, page_request, timeline_building)
    body = page_body(checkpoint, version, page_request.key, build)
    context = {
        "checkpoint": checkpoint,
        **_health_context(checkpoint),
        "chart_range": page_request.chart_range,
        "timeline_building": timeline_building,
        "body": body,
        "page_body": body.filled(_slots(request, checkpoint, version, body)),
    }
    return render(request, "dashboards/checkpoint_detail.html", context)


@login_required
def checkpoint_health_panel(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id, with_status_facts=True)
    context = {"checkpoint": checkpoint, **_health_context(checkpoint)}
    return render(request, "dashboards/partials/checkpoint_health.html", context)


@login_required
def batch_table_panel(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    return HttpResponse(batch_table_html(checkpoint, BatchPageRequest.from_query(request.GET)))


def _page_request(request: HttpRequest) -> PageRequest:
    return PageRequest(
        BatchRange.from_query(request.GET),
        BatchPageRequest.from_query(request.GET),
        f"{request.scheme}://{request.get_host()}",
        request.user.is_staff,
    )


def _health_context(checkpoint: Checkpoint) -> dict:
    """The overview: the health model's status (from the figures the list reads too), open issues, recent syncs."""
    facts = checkpoint.status_facts()
    return {
        "sync_runs": checkpoint.sync_runs.order_by("-started_at")[:RECENT_SYNC_RUNS],
        "issues": checkpoint.issues.open(),
        "status": assess(facts, now=timezone.now(), thresholds=Thresholds.from_settings(settings)),
        "last_heard_at": facts.last_heard_at,
    }


def _slots(request: HttpRequest, checkpoint: Checkpoint, version: PageVersion, body: PageBody) -> dict[str, str]:
    """The body's per-request parts: each "as of" line, the full walk's schedule and form, the
    newest progress's age, the state scan's progress."""
    now = timezone.now()
    full_pass = partial(full_pass_as_of, checkpoint, now=now, interval_seconds=settings.FULL_WALK_INTERVAL_SECONDS)
    synced = find_read(checkpoint.last_synced_at, checkpoint.latest_batch_id)
    inspected = find_read(checkpoint.last_inspected_at, checkpoint.last_inspected_batch_id)
    slots = {
        "timeline_as_of": _as_of_line(sync_as_of(checkpoint, synced, now=now), "timeline-as-of", "sync"),
        "findings_as_of": _as_of_line(full_pass(inspected), "findings-as-of", "full check"),
        "inventory_as_of": _as_of_line(full_pass(version.inventory_read), "inventory-as-of", "full check"),
        "full_walk": render_to_string(
            "dashboards/partials/full_walk.html",
            {"checkpoint": checkpoint, "full_walk": _full_walk(checkpoint, now)},
            request,  # its form's CSRF token
        ),
    }
    if body.has_logs:
        interval = settings.INSPECT_INTERVAL_SECONDS
        logs = probe_pass_as_of(checkpoint, version.logs_read, now=now, interval_seconds=interval)
        slots["logs_as_of"] = _as_of_line(logs, "metadata-logs-as-of", "log check")
    if body.runtime.has_progress:
        slots["runtime_as_of"] = render_to_string("dashboards/partials/runtime_as_of.html", {"runtime": body.runtime})
    if body.state is not None:
        slots |= _state_slots(checkpoint, body, now)
    return slots


def _state_slots(checkpoint: Checkpoint, body: PageBody, now) -> dict[str, str]:
    read = state_read(body.state.latest_version, body.state.read_at)
    context = {
        "state_as_of": sync_as_of(checkpoint, read, now=now, batches_in_flight=1),
        "state_version": body.state.latest_version,
        "inspect_interval": settings.INSPECT_INTERVAL_SECONDS,
        "full_walk_interval": settings.FULL_WALK_INTERVAL_SECONDS,
        "state_follow_min_seconds": settings.STATE_FOLLOW_MIN_SECONDS,
    }
    return {
        "state_as_of": render_to_string("dashboards/partials/state_as_of.html", context),
        "state_scan": render_to_string("dashboards/partials/state_scan.html", {"state_scan": body.state_scan}),
    }


def _as_of_line(as_of: AsOf, as_of_id: str, pass_name: str) -> str:
    context = {"as_of": as_of, "as_of_id": as_of_id, "pass_name": pass_name}
    return render_to_string("dashboards/partials/as_of.html", context)


def _full_walk(checkpoint: Checkpoint, now) -> dict:
    """When the last full walk ran, whether one is asked for, and when the schedule runs the next."""
    next_at = next_full_pass_at(checkpoint, now, settings.FULL_WALK_INTERVAL_SECONDS)
    return {
        "last_at": checkpoint.last_inspected_at,
        "last_batch_id": checkpoint.last_inspected_batch_id,
        "requested_at": checkpoint.full_walk_requested_at,
        "next_in": None if next_at is None else max(next_at - now, timedelta(0)),
        "interval": settings.FULL_WALK_INTERVAL_SECONDS,
        "probe_interval": settings.INSPECT_INTERVAL_SECONDS,
    }
