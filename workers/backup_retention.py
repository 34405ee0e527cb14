"""Prune the backups of risky maintenance runs once their retention period is over.

A rewind, skip or repair copies every file it deletes or overwrites to
``_ckptweb_backup/run-<pk>/`` inside the checkpoint (workers/checkpoint/maintenance/backup.py), so
that the run can be undone. Celery beat runs ``prune_expired_backups`` hourly: a backup goes
CKPTWEB_MAINTENANCE_BACKUP_RETENTION_DAYS after its run ended, unless an undo of it is waiting or
running. Each run is claimed with a conditional UPDATE first, so that workers on several machines
never prune the same backup twice; a prune that fails is released for the next hour's job.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings

from dashboards.models import AuditEntry, MaintenanceRun
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.maintenance.backup import delete_backup
from workers.checkpoint.wording import format_size
from workers.storage_options import open_storage

logger = logging.getLogger(__name__)


def prune_expired_backups(now: datetime) -> dict[str, int]:
    """Delete the backups whose retention is over; return how many runs, files and bytes went."""
    ended_before = now - timedelta(days=settings.MAINTENANCE_BACKUP_RETENTION_DAYS)
    pruned = {"runs": 0, "files": 0, "bytes": 0, "failed": 0}
    due = MaintenanceRun.objects.with_backup_to_prune(ended_before=ended_before).select_related("checkpoint")
    for run in due.order_by("pk"):
        if not MaintenanceRun.objects.claim_backup_pruning(run.pk, now=now):
            continue  # another worker has it
        deleted = _delete_claimed_backup(run)
        if deleted is None:
            pruned["failed"] += 1
            continue
        files, size = deleted
        _audit(run, files, size)
        pruned["runs"] += 1
        pruned["files"] += files
        pruned["bytes"] += size
    return pruned


def _delete_claimed_backup(run: MaintenanceRun) -> tuple[int, int] | None:
    """Delete the run's backup: (files, bytes); None when it could not, the claim given back."""
    try:
        return delete_backup(open_storage(run.checkpoint.url), run.backup_dir)
    except (CheckpointError, ValueError) as exc:
        MaintenanceRun.objects.filter(pk=run.pk).update(backup_pruned_at=None)
        logger.warning("backup of maintenance run %s not pruned: %s", run.pk, exc)
        return None


def _audit(run: MaintenanceRun, files: int, size: int) -> None:
    days = settings.MAINTENANCE_BACKUP_RETENTION_DAYS
    AuditEntry.record(
        AuditEntry.Event.BACKUP_PRUNED,
        actor_name="worker",
        run=run,
        detail=f"backup {run.backup_dir} deleted ({files} files, {format_size(size)}) {days} days after the run ended;"
        " the run can no longer be undone",
        data={"backup_dir": run.backup_dir, "files": files, "bytes": size},
    )
