"""Each checkpoint's periodic sync and each maintenance policy, kept as django-celery-beat PeriodicTasks.

Celery beat (DatabaseScheduler) reads these rows; the task names are strings (dashboards.task_names)
so that the models never import workers.tasks.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django_celery_beat.models import IntervalSchedule, PeriodicTask

from dashboards.task_names import RUN_MAINTENANCE_POLICY, SYNC_CHECKPOINT

if TYPE_CHECKING:
    from dashboards.models import Checkpoint, MaintenancePolicy


def _every_seconds(name: str, task: str, seconds: int, pk: int, *, enabled: bool, description: str) -> PeriodicTask:
    """Create or update the periodic task ``name``: ``task(pk)`` every ``seconds``.

    A run still queued when the next one is due is worthless, so the broker drops it then.
    """
    interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
    periodic, _ = PeriodicTask.objects.update_or_create(
        name=name,
        defaults={
            "task": task,
            "interval": interval,
            "args": json.dumps([pk]),
            "enabled": enabled,
            "expire_seconds": seconds,
            "description": description,
        },
    )
    return periodic


def schedule_sync(checkpoint: Checkpoint) -> PeriodicTask:
    """Create or update the checkpoint's periodic sync to match its interval, enabled flag and archival."""
    return _every_seconds(
        f"sync checkpoint {checkpoint.pk}",
        SYNC_CHECKPOINT,
        checkpoint.sync_interval_seconds,
        checkpoint.pk,
        enabled=checkpoint.is_enabled and not checkpoint.is_archived,
        description=f"Sync {checkpoint.name} ({checkpoint.url})",
    )


def unschedule_sync(checkpoint: Checkpoint) -> None:
    PeriodicTask.objects.filter(name=f"sync checkpoint {checkpoint.pk}").delete()


def schedule_policy(policy: MaintenancePolicy) -> PeriodicTask:
    """Create or update the periodic task of a maintenance policy (disabled while its checkpoint is archived)."""
    return _every_seconds(
        f"maintenance policy {policy.pk}",
        RUN_MAINTENANCE_POLICY,
        policy.interval_seconds,
        policy.pk,
        enabled=policy.is_enabled and not policy.checkpoint.is_archived,
        description=f"{policy.get_action_display()} on {policy.checkpoint.name}",
    )


def unschedule_policy(policy: MaintenancePolicy) -> None:
    PeriodicTask.objects.filter(name=f"maintenance policy {policy.pk}").delete()
