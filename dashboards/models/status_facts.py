"""A checkpoint's status facts from one row of the store: the fields the list and /metrics read
(values(), no model instances) and status_facts_of, which makes the health model's input of a
row or of an instance; count_per_checkpoint, the correlated count they share (on
aggregate_per_checkpoint, which the query page's version uses too).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce

from dashboards.health.query_status import StatusFacts
from dashboards.models.syncs import SyncRun


def aggregate_per_checkpoint(rows: models.QuerySet, aggregate, checkpoint_field: str = "checkpoint") -> Subquery:
    """``aggregate`` over the ``rows`` of each checkpoint (reached by ``checkpoint_field``), in a
    correlated subquery of the select list; None for a checkpoint without rows."""
    grouped = rows.filter(**{checkpoint_field: OuterRef("pk")}).order_by().values(checkpoint_field)
    return Subquery(grouped.annotate(figure=aggregate).values("figure"))


def count_per_checkpoint(rows: models.QuerySet) -> Coalesce:
    """Count the ``rows`` of each checkpoint in a correlated subquery of the select list."""
    return Coalesce(aggregate_per_checkpoint(rows, models.Count("pk")), 0)


def _last_heard(progress_at: datetime | None, input_rows: int | None, idle_at: datetime | None) -> dict[str, Any]:
    """The newest sign of life: a progress (with its input rows) or an idle event (no input)."""
    if idle_at is not None and (progress_at is None or idle_at > progress_at):
        return {"last_heard_at": idle_at, "last_heard_input_rows": 0}
    return {"last_heard_at": progress_at, "last_heard_input_rows": input_rows}


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000


# What the checkpoint list shows of a checkpoint besides the health model's figures.
LIST_FIELDS = (
    "id",
    "name",
    "url",
    "query_id",
    "last_inspected_at",
    "state_rows",
    "state_bytes",
    "state_providers",
    "finding_warning_count",
    "copy_of_id",
)


# The columns and CheckpointQuerySet.with_status_facts annotations the health model reads.
STATUS_FACT_FIELDS = (
    "is_enabled",
    "root_problem",
    "sync_interval_seconds",
    "last_synced_at",
    "last_sync_status",
    "last_sync_message",
    "open_issue_count",
    "finding_error_count",
    "latest_batch_id",
    "latest_batch_at",
    "latest_committed_batch_id",
    "expected_trigger_seconds",
    "trigger_interval_ms",
    "typical_gap_ms",
    "recent_batch_duration_ms",
    "recent_input_rate",
    "recent_process_rate",
    "recent_offsets_behind",
    "earlier_offsets_behind",
    "last_heard_at",
    "last_heard_input_rows",
    "last_idle_at",
    "copy_of_name",
    "copy_of_batch_id",
    "created_at",
)


def status_facts_of(row: Mapping[str, Any]) -> StatusFacts:
    """The health model's input from a checkpoint's STATUS_FACT_FIELDS: a model instance's or a
    plain row's (CheckpointQuerySet.status_list_rows), so both are judged alike."""
    return StatusFacts(
        is_enabled=row["is_enabled"],
        root_problem=row["root_problem"],
        sync_interval_seconds=row["sync_interval_seconds"],
        last_synced_at=row["last_synced_at"],
        last_sync_failed=row["last_sync_status"] == SyncRun.Status.FAILED,
        last_sync_message=row["last_sync_message"] or "",
        unreadable_files=row["open_issue_count"],
        error_findings=row["finding_error_count"],
        latest_batch_id=row["latest_batch_id"],
        latest_batch_at=row["latest_batch_at"],
        latest_committed_batch_id=row["latest_committed_batch_id"],
        trigger_interval_seconds=row["expected_trigger_seconds"] or _seconds(row["trigger_interval_ms"]),
        typical_gap_seconds=_seconds(row["typical_gap_ms"]),
        recent_batch_duration_seconds=_seconds(row["recent_batch_duration_ms"]),
        recent_input_rate=row["recent_input_rate"],
        recent_process_rate=row["recent_process_rate"],
        recent_offsets_behind=row["recent_offsets_behind"],
        earlier_offsets_behind=row["earlier_offsets_behind"],
        **_last_heard(row["last_heard_at"], row["last_heard_input_rows"], row["last_idle_at"]),
        copy_of=row["copy_of_name"] or "",
        copy_of_batch_id=row["copy_of_batch_id"],
        registered_at=row["created_at"],
    )
