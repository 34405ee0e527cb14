"""Each checkpoint's periodic sync, kept as a django-celery-beat PeriodicTask.

Celery beat (DatabaseScheduler) reads these rows; the task name is a string so that the models
never import workers.tasks.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django_celery_beat.models import IntervalSchedule, PeriodicTask

if TYPE_CHECKING:
    from .models import Checkpoint

SYNC_TASK_NAME = "workers.tasks.sync_checkpoint"


def schedule_sync(checkpoint: Checkpoint) -> PeriodicTask:
    """Create or update the checkpoint's periodic sync to match its interval and enabled flag."""
    interval, _ = IntervalSchedule.objects.get_or_create(
        every=checkpoint.sync_interval_seconds, period=IntervalSchedule.SECONDS
    )
    task, _ = PeriodicTask.objects.update_or_create(
        name=f"sync checkpoint {checkpoint.pk}",
        defaults={
            "task": SYNC_TASK_NAME,
            "interval": interval,
            "args": json.dumps([checkpoint.pk]),
            "enabled": checkpoint.is_enabled,
            # A sync still queued when the next one is due is worthless: let the broker drop it.
            "expire_seconds": checkpoint.sync_interval_seconds,
            "description": f"Sync {checkpoint.name} ({checkpoint.url})",
        },
    )
    return task


def unschedule_sync(checkpoint: Checkpoint) -> None:
    PeriodicTask.objects.filter(name=f"sync checkpoint {checkpoint.pk}").delete()
