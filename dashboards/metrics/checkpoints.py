"""Per-checkpoint families from the Checkpoint row: batches, watermark, sync schedule, last sync.

One query reads every checkpoint with what the sync worker keeps on its row, plus correlated
subqueries that each use an index: the newest batch's timestamp and watermark, the last finished
sync run, the newest progress report the checkpoint owns (CheckpointQuerySet.with_progress_owner),
the count of open sync issues. ``read_checkpoints`` is query 1 of a scrape; the other modules take
its rows and labels.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import F, OuterRef, Subquery

from dashboards.metrics.families import CheckpointLabels, add, epoch_ms_to_seconds, gauge, seconds
from dashboards.models import Batch, BatchProgress, Checkpoint, SyncIssue, SyncRun
from dashboards.models.status_facts import count_per_checkpoint

# What every family group takes from a checkpoint's row.
ROW_FIELDS = (
    "pk",
    "name",
    "query_uuid",
    "query_name",
    "is_enabled",
    "sync_interval_seconds",
    "latest_batch_id",
    "latest_committed_batch_id",
    "uncommitted_batch_count",
    "last_synced_at",
    "last_inspected_at",
    "latest_timestamp_ms",
    "latest_watermark_ms",
    "last_run_pk",
    "progress_pk",
    "open_issue_count",
)


def read_checkpoints() -> list[dict]:
    """Every active checkpoint with its health figures, in one query.

    Archived checkpoints are left out, so no family has a sample for them (``add`` skips what
    the labels lack): an archived query's series end instead of firing staleness alerts.
    """
    newest_batch = Batch.objects.filter(checkpoint=OuterRef("pk"), batch_id=OuterRef("latest_batch_id"))
    last_run = SyncRun.objects.filter(checkpoint=OuterRef("pk"), finished_at__isnull=False).order_by("-started_at")
    newest_progress = BatchProgress.objects.owned_by_outer_checkpoint().order_by("-batch_id")
    rows = (
        Checkpoint.objects.active()
        .with_progress_owner()
        .annotate(
            query_uuid=F("query__query_id"),
            query_name=F("query__name"),
            latest_timestamp_ms=Subquery(newest_batch.values("timestamp_ms")[:1]),
            latest_watermark_ms=Subquery(newest_batch.values("watermark_ms")[:1]),
            last_run_pk=Subquery(last_run.values("pk")[:1]),
            progress_pk=Subquery(newest_progress.values("pk")[:1]),
            open_issue_count=count_per_checkpoint(SyncIssue.objects.open()),
        )
    )
    return list(rows.order_by("name").values(*ROW_FIELDS))


def checkpoint_labels(rows: list[dict]) -> CheckpointLabels:
    return {row["pk"]: (row["name"], str(row["query_uuid"] or ""), row["query_name"] or "") for row in rows}


def _watermark_lag_seconds(row: dict) -> float | None:
    if not row["latest_timestamp_ms"] or not row["latest_watermark_ms"]:
        return None
    return (row["latest_timestamp_ms"] - row["latest_watermark_ms"]) / 1000


# Family name (after ckptweb_) -> (its help, its value from a checkpoint's row); all gauges.
CHECKPOINT_GAUGES = {
    "checkpoint_enabled": ("1 if the checkpoint is synced, 0 if disabled.", lambda row: int(row["is_enabled"])),
    "checkpoint_sync_interval_seconds": (
        "Configured interval between two syncs.",
        lambda row: row["sync_interval_seconds"],
    ),
    "checkpoint_latest_batch_id": (
        "Newest batch id in the offset log (offsets/N).",
        lambda row: row["latest_batch_id"],
    ),
    "checkpoint_latest_committed_batch_id": (
        "Newest batch id in the commit log (commits/N).",
        lambda row: row["latest_committed_batch_id"],
    ),
    "checkpoint_uncommitted_batches": (
        "Batches with an offsets/N entry and no commits/N entry.",
        lambda row: row["uncommitted_batch_count"],
    ),
    "checkpoint_latest_batch_timestamp_seconds": (
        "batchTimestampMs of the newest offset-log entry (Unix seconds): when Spark planned the newest batch.",
        lambda row: epoch_ms_to_seconds(row["latest_timestamp_ms"]),
    ),
    "checkpoint_watermark_timestamp_seconds": (
        "batchWatermarkMs of the newest offset-log entry (Unix seconds); absent without a watermark.",
        lambda row: epoch_ms_to_seconds(row["latest_watermark_ms"]),
    ),
    "checkpoint_watermark_lag_seconds": (
        "batchTimestampMs - batchWatermarkMs of the newest batch: how far event time trails processing time.",
        _watermark_lag_seconds,
    ),
    "checkpoint_last_inspection_timestamp_seconds": (
        "When the last full pass (inventory, integrity checks, logs, state) ran (Unix seconds).",
        lambda row: seconds(row["last_inspected_at"]),
    ),
}


def checkpoint_families(rows: list[dict], labels: CheckpointLabels) -> Iterator:
    """Batches and watermark as the offset and commit logs give them, and the sync schedule."""
    families = {name: gauge(name, documentation) for name, (documentation, _) in CHECKPOINT_GAUGES.items()}
    for row in rows:
        for name, (_, value_of) in CHECKPOINT_GAUGES.items():
            add(families[name], labels, row["pk"], value_of(row))
    yield from families.values()
