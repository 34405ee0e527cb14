"""Tell whether a sync fell behind Spark's log purge, so that it lists the logs at once.

Spark deletes offsets/N and commits/N older than ``minBatchesToRetain`` batches (100 by default,
as few as 1) each time it commits (HDFSMetadataLog.purge). A sync that fell further behind (a
worker outage, a long queue, a short retention on a fast query) probes for an ``offsets/N`` that
is gone and, with nothing more, would see no new batch until the next listing.

A missing next name looks the same whether Spark has not written it yet or has already deleted
it; the newest stored batch's offsets file tells the two apart (Spark deletes the older first).
That costs one look-up, which only a probe that found nothing new pays, and only when the query's
own rhythm says batches should have come: the previous sync saw it alive, and at least two usual
gaps have passed since its newest stored batch was planned (Spark purges the next name only after
planning at least two more). A query stopped or idle past its quiet period pays nothing, and a
query slower than the syncs only once its next batch is overdue.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dashboards.health.query_status import Thresholds, quiet_seconds
from dashboards.models import Checkpoint
from workers.checkpoint.inventory import TreeListing
from workers.checkpoint.logdir import list_batch_ids
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.status_figures import rhythm_of

# Usual gaps after the newest stored batch L before Spark can have deleted the next name: with
# minBatchesToRetain=1 (the least it allows), planning batch L+3 deletes offsets/L+1 (it purges
# below L+2), three batch starts after L; two leave room for batches started early.
USUAL_GAPS_BEFORE_A_PURGE = 2


def listing_shows_purge_past(checkpoint: Checkpoint, listing: TreeListing | None) -> bool:
    """Tell whether a full pass's listing shows the oldest offsets file past the next expected one."""
    if listing is None or checkpoint.latest_batch_id is None:
        return False
    offset_ids = list_batch_ids(listing, "offsets")
    return bool(offset_ids) and offset_ids[0] > checkpoint.latest_batch_id + 1


def probe_fell_behind_purge(
    checkpoint: Checkpoint, storage: CheckpointStorage, now: datetime, thresholds: Thresholds
) -> bool:
    """Tell whether Spark purged the newest stored batch's offsets file; call after a probe found nothing new."""
    if not _purge_possible_since_the_newest_batch(checkpoint, now, thresholds):
        return False
    return not storage.exists(f"offsets/{checkpoint.latest_batch_id}")


def _purge_possible_since_the_newest_batch(checkpoint: Checkpoint, now: datetime, thresholds: Thresholds) -> bool:
    """The previous sync saw the query alive, and its rhythm allows a purge's batches since its newest batch."""
    latest_at, synced_at = checkpoint.latest_batch_at, checkpoint.last_synced_at
    if checkpoint.latest_batch_id is None or latest_at is None or synced_at is None:
        return False
    rhythm = rhythm_of(checkpoint)
    was_alive = synced_at - latest_at <= timedelta(seconds=quiet_seconds(rhythm, thresholds))
    gap = rhythm.trigger_interval_seconds or rhythm.typical_gap_seconds or 0.0
    return was_alive and now - latest_at >= timedelta(seconds=USUAL_GAPS_BEFORE_A_PURGE * gap)
