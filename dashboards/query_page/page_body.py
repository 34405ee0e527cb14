"""The query page below its overview, rendered once per page version and shared by every web process.

Why: with 50 clients on 2 cores a request's latency is about 25 times its CPU time, and most of
the page's CPU went into rendering sections whose rows had not moved since the last request
(Runtime, Runs, State, Integrity, Logs, Files, Batches: a dozen queries and most of the template
time). page_version.py tells in two queries whether any of them moved; this renders them all once
per version (partials/query_page_body.html) and keeps what the overview's navigation needs.

What says how long ago (the "as of" lines, the full walk's schedule and its form's CSRF token,
the newest progress's age, a state scan's progress) cannot be cached: the text keeps a marker
where each goes (SLOTS), and the view fills them per request from the figures kept beside it.
Django escapes "<" in every value it renders, so no row's text can forge a marker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.utils.safestring import SafeString, mark_safe

from dashboards.models import Checkpoint, StateScan
from dashboards.query_page.fragments import cached_value
from dashboards.query_page.page_version import PageVersion
from dashboards.query_page.runtime_section import RuntimeSection
from dashboards.query_page.state_panel import StatePanel

SLOTS = (
    "timeline_as_of",
    "runtime_as_of",
    "state_as_of",
    "state_scan",
    "findings_as_of",
    "full_walk",
    "logs_as_of",
    "inventory_as_of",
)


def slot_marker(name: str) -> str:
    return f"<!--ckptweb-slot:{name}-->"


def slot_markers() -> dict[str, SafeString]:
    """What the body template renders for each slot: its marker."""
    return {name: mark_safe(slot_marker(name)) for name in SLOTS}  # noqa: S308 (our own constant text)


@dataclass(frozen=True, slots=True)
class PageBody:
    """The rendered sections, and the figures the view needs to fill their slots and the navigation."""

    html: str  # with a slot_marker wherever a slot goes
    runtime: RuntimeSection
    state: StatePanel | None
    state_scan: StateScan | None
    finding_count: int
    has_logs: bool

    def filled(self, slots: Mapping[str, str]) -> SafeString:
        """The text with each slot's marker replaced by its per-request HTML (a slot not given: nothing)."""
        html = self.html
        for name in SLOTS:
            html = html.replace(slot_marker(name), slots.get(name, ""))
        return mark_safe(html)  # noqa: S308 (rendered by Django's templates, which escaped every value)


def checkpoint_settings(checkpoint: Checkpoint) -> tuple:
    """What a user edits on the checkpoint (the Edit form, archive and restore) and which progress it owns:
    neither moves a version a sync or a pass writes."""
    archived = checkpoint.archived_at.timestamp() if checkpoint.archived_at else None
    return (
        checkpoint.name,
        checkpoint.url,
        checkpoint.is_enabled,
        checkpoint.sync_interval_seconds,
        checkpoint.sink_log_url,
        checkpoint.file_log_compact_interval,
        checkpoint.expected_trigger_seconds,
        archived,
        checkpoint.progress_ceiling,
        checkpoint.copy_of_id,
    )


def page_body(
    checkpoint: Checkpoint, version: PageVersion, request_key: tuple, build: Callable[[], PageBody]
) -> PageBody:
    """``build()``'s body, built once per page version, checkpoint settings and ``request_key``
    (what the request asks for: its batch range and page, and what the body shows of the request)."""
    return cached_value("query-page-body", (*version.key, *checkpoint_settings(checkpoint), *request_key), build)
