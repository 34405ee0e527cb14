"""The query page's version: in two queries, what moves whenever a row behind its sections moves.

Why: with 50 clients on 2 cores a request waits for the CPU of the 49 before it, and the query
page spent it asking each section in turn whether its rows had moved (a query each) and rendering
them again when they had not. One correlated subquery per figure tells nearly all at once; the
sections are rendered once per version (dashboards/query_page/page_body.py). Each figure is an
index lookup or an aggregate over one checkpoint's rows (a few hundred state partitions at most).

What each writer moves:
- a sync: the checkpoint's own row (last_synced_at, latest_batch_id: synced_version), the roll-up
  builds' progress (timeline_rollups_*, the query's rollups_*);
- progress arriving: the span of the batch ids the checkpoint owns (runtime_version);
- state rows (full walk, state follow, probe, scan chunks): the state panel's aggregate
  (state_panel.state_rows_version, a second query: one pass over the rows, where a subquery per
  figure would be ten) and the scans' progress;
- the full walk: its findings (an upsert sets last_seen_at, a resolve changes the count), the
  inventory pass (taken_at);
- the full walk or the probe: the compactible logs' contents (a probe that finds a log unchanged
  moves only its updated_at, which the page reads per request for "as of", not as a version).
What a version cannot see, fragments.FRAGMENT_CACHE_SECONDS bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Max, OuterRef, QuerySet, Subquery, Sum

from dashboards.models import (
    BatchProgress,
    Checkpoint,
    CompactFile,
    DirectoryInventory,
    Finding,
    MetadataLog,
    StateScan,
)
from dashboards.models.precompiled import PrecompiledValues
from dashboards.models.status_facts import aggregate_per_checkpoint
from dashboards.query_page.as_of import Read, find_read
from dashboards.query_page.fragments import checkpoint_identity, synced_version
from dashboards.query_page.state_panel import StateRowsVersion, state_rows_version


def _first_of(rows: QuerySet, field: str, order: str) -> Subquery:
    return Subquery(rows.filter(checkpoint=OuterRef("pk")).order_by(order).values(field)[:1])


def _owned_progress_end(order: str) -> Subquery:
    return Subquery(BatchProgress.objects.owned_by_outer_checkpoint().order_by(order).values("batch_id")[:1])


# Figures that only version the sections (their values are not shown): name -> (rows, aggregate).
_SCANS = {
    "scan_newest_pk": (StateScan.objects.all(), Max("pk")),
    "scan_chunks_done": (StateScan.objects.all(), Sum("chunks_done")),
    "scan_finished": (StateScan.objects.all(), Max("finished_at")),
    "scan_errors": (StateScan.objects.all(), Sum("error_count")),
}
_FINDINGS = {
    "finding_count": (Finding.objects.open(), Count("pk")),
    "finding_newest_pk": (Finding.objects.open(), Max("pk")),
    "finding_last_seen": (Finding.objects.open(), Max("last_seen_at")),
}
_LOGS = {
    "log_count": (MetadataLog.objects.all(), Count("pk")),
    "log_newest_pk": (MetadataLog.objects.all(), Max("pk")),
    "log_batch_sum": (MetadataLog.objects.all(), Sum("latest_batch_id")),
    "log_entry_sum": (MetadataLog.objects.all(), Sum("live_entries")),
    "log_compact_bytes_sum": (MetadataLog.objects.all(), Sum("latest_compact_bytes")),
    "log_interval_sum": (MetadataLog.objects.all(), Sum("compact_interval")),
}
_INVENTORY = {
    "inventory_taken": (DirectoryInventory.objects.all(), Max("taken_at")),
    "inventory_newest_pk": (DirectoryInventory.objects.all(), Max("pk")),
}
_PER_CHECKPOINT = {**_SCANS, **_FINDINGS, **_LOGS, **_INVENTORY}
# Compact files reach their checkpoint through their log.
_COMPACT_FILES = {
    "compact_file_count": (CompactFile.objects.all(), Count("pk")),
    "compact_file_newest_pk": (CompactFile.objects.all(), Max("pk")),
}
VERSION_FIELDS = (*_PER_CHECKPOINT, *_COMPACT_FILES, "progress_first", "progress_last")


def _page_figures(checkpoint_id: int) -> QuerySet:
    figures = {name: aggregate_per_checkpoint(rows, aggregate) for name, (rows, aggregate) in _PER_CHECKPOINT.items()}
    figures |= {
        name: aggregate_per_checkpoint(rows, aggregate, "log__checkpoint")
        for name, (rows, aggregate) in _COMPACT_FILES.items()
    }
    oldest_log = MetadataLog.objects.all()
    annotated = Checkpoint.objects.filter(pk=checkpoint_id).with_progress_owner()
    return annotated.annotate(
        **figures,
        progress_first=_owned_progress_end("batch_id"),
        progress_last=_owned_progress_end("-batch_id"),
        # Shown per request ("as of"): the oldest log's read, and which batch the newest inventory was at.
        logs_read_at=_first_of(oldest_log, "updated_at", "updated_at"),
        logs_read_at_batch_id=_first_of(oldest_log, "read_at_batch_id", "updated_at"),
        inventory_taken_at_batch_id=_first_of(DirectoryInventory.objects.all(), "taken_at_batch_id", "-taken_at"),
    ).values(*VERSION_FIELDS, "logs_read_at", "logs_read_at_batch_id", "inventory_taken_at_batch_id")


PAGE_FIGURES_OF_ONE = PrecompiledValues(_page_figures)


@dataclass(frozen=True, slots=True)
class PageVersion:
    key: tuple  # the whole page's: every figure, the checkpoint's own, its roll-up builds', the state's
    progress: tuple  # runtime_series.runtime_version's: the span of the progress the checkpoint owns
    state: StateRowsVersion
    logs_read: Read | None  # the oldest compactible log's (the panel is as old as its oldest row)
    inventory_read: Read | None


def page_version(checkpoint: Checkpoint) -> PageVersion | None:
    """The version of the page of ``checkpoint`` (fetched with its query); None when it is gone."""
    rows = PAGE_FIGURES_OF_ONE.rows(checkpoint.pk)
    if not rows:
        return None
    figures = rows[0]
    identity = checkpoint_identity(checkpoint)
    progress = (*identity, checkpoint.query_id, figures["progress_first"], figures["progress_last"])
    state = state_rows_version(checkpoint)
    query = checkpoint.query
    builds = (
        checkpoint.timeline_rollups_built,
        checkpoint.timeline_rollups_through,
        None if query is None else (query.rollups_built, query.rollups_through),
    )
    key = (*synced_version(checkpoint), builds, *(figures[name] for name in VERSION_FIELDS), *state.key[2:])
    return PageVersion(
        key,
        progress,
        state,
        find_read(figures["logs_read_at"], figures["logs_read_at_batch_id"]),
        find_read(figures["inventory_taken"], figures["inventory_taken_at_batch_id"]),
    )
