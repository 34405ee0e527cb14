"""Which progress of a query belongs to which registered checkpoint.

Progress events name their query id, not a checkpoint. Two registered checkpoints can share one
query id: a copy of a live checkpoint, a restored backup. Their histories are one up to where the
copy was taken, so progress of a batch both have is both's; progress past a checkpoint's newest
batch belongs to the copy further ahead. A checkpoint behind another of its query id therefore
takes progress up to its newest batch + 1 (the batch being planned, as the health model does in
CheckpointQuerySet.with_status_facts); the one furthest ahead, or the only one, takes it all, so
a live query's charts do not wait for the next sync.
"""

from __future__ import annotations

from dashboards.models import Checkpoint


def progress_ceiling(checkpoint: Checkpoint) -> int | None:
    """The newest batch id whose progress is this checkpoint's, or None when every batch's is (one query)."""
    if checkpoint.query_id is None or checkpoint.latest_batch_id is None:
        return None
    ahead = Checkpoint.objects.active().filter(
        query_id=checkpoint.query_id, latest_batch_id__gt=checkpoint.latest_batch_id
    )
    return checkpoint.latest_batch_id + 1 if ahead.exclude(pk=checkpoint.pk).exists() else None
