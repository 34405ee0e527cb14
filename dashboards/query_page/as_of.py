"""Which batch a panel's figures were read at, how long ago, and how far behind the batch table that is.

House style B8.1: a panel whose figures come from a pass that does not run on every batch says
"as of batch N, T ago", louder when it is behind the latest batch. The passes are the sync (the
batch timeline; the state panel, whose figures follow each sync's newly committed batches, on an
object store at most once per CKPTWEB_STATE_FOLLOW_MIN_SECONDS), the probe between full walks,
every CKPTWEB_INSPECT_INTERVAL_SECONDS (compactible logs; snapshots and deletions in state
stores), and the full walk, every CKPTWEB_FULL_WALK_INTERVAL_SECONDS or when asked for
(integrity, files). Any of them can fall
behind the query (a failing sync, a follow held back, stopped workers): a panel that does not say
so shows a stale figure as current.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashboards.models import Checkpoint

# A next read this much past its time is late, not merely being picked up by a worker.
NEXT_READ_GRACE_SECONDS = 60


@dataclass(frozen=True, slots=True)
class Read:
    """One read of a panel's figures: when, and the newest batch it saw (None: no batch yet, or not recorded)."""

    at: datetime
    batch_id: int | None


def find_read(at: datetime | None, batch_id: int | None) -> Read | None:
    """The read a row records, or None when its time is unset (never read)."""
    return None if at is None else Read(at, batch_id)


@dataclass(frozen=True, slots=True)
class AsOf:
    """What a panel's "as of" line says; ``read`` None means the panel was never read."""

    read: Read | None
    latest_batch_id: int | None
    batches_behind: int
    is_behind: bool
    next_read_at: datetime | None  # None: ckptweb does not sync the checkpoint, so nothing will read it
    next_read_in: timedelta | None  # 0 once due
    is_next_read_late: bool


def as_of(
    read: Read | None,
    *,
    latest_batch_id: int | None,
    next_read_at: datetime | None,
    now: datetime,
    batches_in_flight: int = 0,
) -> AsOf:
    """Say how far ``read`` is behind the batch table's ``latest_batch_id`` and when the next read is.

    ``batches_in_flight`` are batches a current read cannot have seen yet: 1 for state, whose
    version appears when its batch commits, so the batch Spark is running has none.
    """
    behind = 0
    if read is not None and read.batch_id is not None and latest_batch_id is not None:
        behind = max(latest_batch_id - read.batch_id, 0)
    next_in = None if next_read_at is None else max(next_read_at - now, timedelta(0))
    is_late = next_read_at is not None and now - next_read_at > timedelta(seconds=NEXT_READ_GRACE_SECONDS)
    return AsOf(read, latest_batch_id, behind, behind > batches_in_flight, next_read_at, next_in, is_late)


def sync_as_of(checkpoint: Checkpoint, read: Read | None, *, now: datetime, batches_in_flight: int = 0) -> AsOf:
    """The "as of" of figures a sync reads; the next read is the next scheduled sync."""
    return as_of(
        read,
        latest_batch_id=checkpoint.latest_batch_id,
        next_read_at=next_sync_at(checkpoint, now),
        now=now,
        batches_in_flight=batches_in_flight,
    )


def full_pass_as_of(checkpoint: Checkpoint, read: Read | None, *, now: datetime, interval_seconds: int) -> AsOf:
    """The "as of" of figures the full walk reads (every ``interval_seconds``, with a sync; sooner when asked)."""
    next_at = next_full_pass_at(checkpoint, now, interval_seconds)
    return as_of(read, latest_batch_id=checkpoint.latest_batch_id, next_read_at=next_at, now=now)


def probe_pass_as_of(checkpoint: Checkpoint, read: Read | None, *, now: datetime, interval_seconds: int) -> AsOf:
    """The "as of" of figures the probe between full walks follows (every ``interval_seconds``, with a sync)."""
    next_at = _next_pass_at(checkpoint, now, checkpoint.last_probed_at, interval_seconds)
    return as_of(read, latest_batch_id=checkpoint.latest_batch_id, next_read_at=next_at, now=now)


def next_sync_at(checkpoint: Checkpoint, now: datetime) -> datetime | None:
    """When the schedule syncs the checkpoint next: now if it never did, None if it does not sync it."""
    if not checkpoint.is_enabled or checkpoint.is_archived:
        return None
    if checkpoint.last_synced_at is None:
        return now
    return checkpoint.last_synced_at + timedelta(seconds=checkpoint.sync_interval_seconds)


def next_full_pass_at(checkpoint: Checkpoint, now: datetime, interval_seconds: int) -> datetime | None:
    """When the full walk runs next: with the next sync when asked for on the page, else with the
    first sync once its interval has passed (workers.inspection.full_walk_due)."""
    if checkpoint.full_walk_requested_at is not None:
        return next_sync_at(checkpoint, now)
    return _next_pass_at(checkpoint, now, checkpoint.last_inspected_at, interval_seconds)


def _next_pass_at(
    checkpoint: Checkpoint, now: datetime, last: datetime | None, interval_seconds: int
) -> datetime | None:
    sync_at = next_sync_at(checkpoint, now)
    if sync_at is None or last is None:
        return sync_at
    return max(sync_at, last + timedelta(seconds=interval_seconds))


def state_read(latest_version: int | None, read_at: datetime | None) -> Read | None:
    """The state panel's read of its newest state version: Spark's version N holds the state after
    batch N - 1 (HDFSBackedStateStoreProvider and RocksDB alike: batch b commits version b + 1)."""
    if read_at is None:
        return None
    return Read(read_at, None if latest_version is None else latest_version - 1)
