"""What the query page shows below its overview, gathered and rendered for one page version.

page_body.py caches what build_page_body returns; the view fills the slots and renders the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.template.loader import render_to_string

from dashboards.models import BatchProgress, Checkpoint, DirectoryInventory, StateScan
from dashboards.query_page.batch_pages import BatchPageRequest, read_batch_page
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.fragments import cached_text, synced_version
from dashboards.query_page.log_outlooks import log_outlooks
from dashboards.query_page.page_body import PageBody, slot_markers
from dashboards.query_page.page_version import PageVersion
from dashboards.query_page.run_summary import runs_section
from dashboards.query_page.runtime_section import runtime_section
from dashboards.query_page.state_panel import state_panel
from dashboards.query_page.summary_builds import SummaryBuild


@dataclass(frozen=True, slots=True)
class PageRequest:
    """What a request asks of the body: the charts' batch range, the batch table's page, and the
    two things the body shows of the request itself (in the Runtime section's empty state)."""

    chart_range: BatchRange
    batch_page: BatchPageRequest
    site_url: str  # where a listener sends progress
    is_staff: bool  # whether the admin's pages are links

    @property
    def key(self) -> tuple:
        return (
            self.chart_range.as_query(),
            self.batch_page.before,
            self.batch_page.after,
            self.site_url,
            self.is_staff,
        )


def build_page_body(
    checkpoint: Checkpoint, version: PageVersion, page_request: PageRequest, timeline_building: SummaryBuild | None
) -> PageBody:
    """Every section below the overview, rendered with a marker for each slot."""
    runtime = runtime_section(checkpoint, version.progress)
    panel = state_panel(checkpoint, version.state)
    scan = StateScan.objects.latest_for(checkpoint) if panel is not None else None
    findings = list(checkpoint.findings.open())
    logs = log_outlooks(checkpoint)
    context = {
        "checkpoint": checkpoint,
        "slots": slot_markers(),
        "chart_range": page_request.chart_range,
        "timeline_building": timeline_building,
        "runtime": runtime,
        "runs": runs_section(checkpoint, page_request.chart_range, version.progress),
        "state_panel": panel,
        "findings": findings,
        "metadata_logs": logs,
        "compaction_speed": settings.COMPACTION_BYTES_PER_SECOND,
        "inventory": list(DirectoryInventory.objects.latest_for(checkpoint)),
        "batch_table": batch_table_html(checkpoint, page_request.batch_page),
        "site_url": page_request.site_url,
        "is_staff": page_request.is_staff,
    }
    html = render_to_string("dashboards/partials/query_page_body.html", context)
    return PageBody(html, runtime, panel, scan, len(findings), bool(logs))


def batch_table_html(checkpoint: Checkpoint, page_request: BatchPageRequest) -> str:
    """The batch table partial for the page asked for, rendered once per sync (it needs no request)."""
    return cached_text(
        "batch-table",
        (*synced_version(checkpoint), page_request.before, page_request.after),
        partial(_render_batch_table, checkpoint, page_request),
    )


def _render_batch_table(checkpoint: Checkpoint, page_request: BatchPageRequest) -> str:
    page = read_batch_page(checkpoint.batches.for_table(), page_request, latest_batch_id=checkpoint.latest_batch_id)
    progress = BatchProgress.objects.table_figures(checkpoint.query_id, [batch.batch_id for batch in page.batches])
    context = {"checkpoint": checkpoint, "batch_page": page, "batch_progress": progress}
    return render_to_string("dashboards/partials/batch_table.html", context)
