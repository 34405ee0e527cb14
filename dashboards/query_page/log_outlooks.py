"""The compactible logs' rows as the query page and the compact-size chart read them: each log's
compact files and, for a sink log, when its compaction will outgrow the trigger interval."""

from __future__ import annotations

from django.conf import settings

from dashboards.models import Checkpoint, MetadataLog
from dashboards.query_page.compaction import CompactionOutlook, median_trigger_seconds, project_compaction

# Batches whose start times give the trigger interval of the compaction projection.
TRIGGER_SAMPLE_BATCHES = 200


def log_outlooks(checkpoint: Checkpoint) -> list[tuple[MetadataLog, CompactionOutlook | None]]:
    """Every compactible log of the checkpoint with its projection (None where there is none)."""
    logs = list(checkpoint.metadata_logs.all())
    trigger = trigger_seconds(checkpoint) if logs else None
    return [(log, outlook(log, compact_sizes(log), trigger)) for log in logs]


def compact_sizes(log: MetadataLog) -> list[tuple[int, int]]:
    return list(log.compact_files.values_list("batch_id", "size_bytes"))


def trigger_seconds(checkpoint: Checkpoint) -> float | None:
    return median_trigger_seconds(checkpoint.batches.recent_timestamps(TRIGGER_SAMPLE_BATCHES))


def outlook(log: MetadataLog, sizes: list[tuple[int, int]], trigger: float | None) -> CompactionOutlook | None:
    """The projection for a sink log (its batch ids are the query's); source logs count by logOffset."""
    if trigger is None or log.latest_batch_id is None:
        return None
    return project_compaction(
        sizes,
        latest_batch_id=log.latest_batch_id,
        trigger_seconds=trigger,
        bytes_per_second=settings.COMPACTION_BYTES_PER_SECOND,
    )
