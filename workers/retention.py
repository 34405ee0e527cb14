"""Keep the history the workers write bounded, whatever the number of checkpoints and the years.

Each sync writes a SyncRun row and each full pass a DirectoryInventory row per directory: at the
default intervals (30 s, 300 s) that is 2,880 sync runs and some 2,300 inventory rows a day per
checkpoint, for ever. Celery beat runs ``prune_history`` hourly:

* sync runs older than CKPTWEB_SYNC_HISTORY_DAYS are added into their checkpoint's SyncTotal rows
  (per status: runs, storage calls, bytes) and deleted in the same transaction, so the /metrics
  counters, which are the totals plus the runs still kept, never drop;
* inventory passes older than CKPTWEB_INVENTORY_HISTORY_DAYS are thinned to the last pass of each
  (UTC) day, which is what the growth chart needs at that distance;
* the state key sets this worker kept (workers.state_follow) for checkpoints since deleted go.

Each checkpoint is pruned in chunks of PRUNE_CHUNK_ROWS, one transaction each. On PostgreSQL
the runs of a chunk are locked with SKIP LOCKED, so two prunes at once fold disjoint rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from dashboards.models import Checkpoint, DirectoryInventory, SyncRun, SyncTotal
from workers.state_follow import forget_state_keys_except

PRUNE_CHUNK_ROWS = 5_000


def prune_history(now: datetime) -> dict[str, int]:
    """Fold and delete old sync runs, thin old inventory passes; return how many rows went."""
    runs_cutoff = now - timedelta(days=settings.SYNC_HISTORY_DAYS)
    inventory_cutoff = now - timedelta(days=settings.INVENTORY_HISTORY_DAYS)
    pruned = {"sync_runs": 0, "inventory_rows": 0}
    checkpoint_ids = list(Checkpoint.objects.order_by("pk").values_list("pk", flat=True))
    for checkpoint_id in checkpoint_ids:
        pruned["sync_runs"] += prune_sync_runs(checkpoint_id, runs_cutoff)
        pruned["inventory_rows"] += thin_inventory(checkpoint_id, inventory_cutoff)
    pruned["state_key_sets"] = forget_state_keys_except(checkpoint_ids)
    return pruned


def prune_sync_runs(checkpoint_id: int, cutoff: datetime) -> int:
    """Fold the checkpoint's finished sync runs that started before ``cutoff`` into its totals, then delete them."""
    folded = 0
    while True:
        chunk = _fold_sync_run_chunk(checkpoint_id, cutoff)
        folded += chunk
        if chunk < PRUNE_CHUNK_ROWS:
            return folded


@transaction.atomic
def _fold_sync_run_chunk(checkpoint_id: int, cutoff: datetime) -> int:
    old_runs = SyncRun.objects.filter(checkpoint_id=checkpoint_id).finished_before(cutoff).order_by("pk")
    ids = list(old_runs.select_for_update(skip_locked=True).values_list("pk", flat=True)[:PRUNE_CHUNK_ROWS])
    if not ids:
        return 0
    for row in SyncRun.objects.filter(pk__in=ids).totals_by_checkpoint_and_status():
        _add_to_total(checkpoint_id, row)
    SyncRun.objects.filter(pk__in=ids).delete()
    return len(ids)


def _add_to_total(checkpoint_id: int, row: dict) -> None:
    """Add one status's runs and summed figures to the checkpoint's SyncTotal of that status."""
    total, _ = SyncTotal.objects.get_or_create(checkpoint_id=checkpoint_id, status=row["status"])
    sums = {field: F(field) + (row[field] or 0) for field in SyncTotal.SUMMED_FIELDS}
    SyncTotal.objects.filter(pk=total.pk).update(runs=F("runs") + row["runs"], **sums)


def thin_inventory(checkpoint_id: int, cutoff: datetime) -> int:
    """Delete the checkpoint's inventory passes taken before ``cutoff`` but the last of each UTC day."""
    last_of_day: dict = {}
    for taken_at in DirectoryInventory.objects.pass_times_before(checkpoint_id, cutoff):
        last_of_day[taken_at.date()] = taken_at  # oldest first: the last one written stays
    older = DirectoryInventory.objects.filter(checkpoint_id=checkpoint_id, taken_at__lt=cutoff)
    deleted, _ = older.exclude(taken_at__in=list(last_of_day.values())).delete()
    return deleted
