"""Celery routing: which queue each task goes to (settings.TASK_QUEUES, docs/scaling.md).

A task sent with an explicit ``queue=`` keeps it (Celery gives explicit options precedence over
routers). Syncs of checkpoints on a storage scheme named in CKPTWEB_SYNC_QUEUES_BY_SCHEME go to
that scheme's queue, so each backend gets the concurrency of the workers consuming its queue.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

TASK_KINDS = {
    "workers.tasks.sync_checkpoint": "sync",
    "workers.tasks.count_state_rows": "state",
    "workers.tasks.sample_state_partition": "state",
    "workers.tasks.plan_maintenance": "maintenance",
    "workers.tasks.run_maintenance": "maintenance",
    "workers.tasks.run_maintenance_policy": "maintenance",
    "workers.tasks.prune_maintenance_backups": "maintenance",  # it deletes inside checkpoints
}


def storage_scheme(url: str) -> str:
    """The scheme of a checkpoint URL ("file" for a plain path; s3a is S3)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    return "s3" if scheme in ("s3a", "s3n") else scheme


def sync_queue_for(url: str) -> str:
    """The queue of a sync of the checkpoint at ``url``."""
    return settings.SYNC_QUEUES_BY_SCHEME.get(storage_scheme(url), settings.TASK_QUEUES["sync"])


def route_task(
    name: str, args: tuple, kwargs: dict, options: dict, task: Any = None, **_: Any
) -> dict[str, str] | None:
    """Celery router (settings.CELERY_TASK_ROUTES)."""
    kind = TASK_KINDS.get(name)
    if kind is None:
        return None  # the default queue: housekeeping
    if kind == "sync" and settings.SYNC_QUEUES_BY_SCHEME and args:
        return {"queue": _sync_queue_of_checkpoint(args[0])}
    return {"queue": settings.TASK_QUEUES[kind]}


def _sync_queue_of_checkpoint(checkpoint_id: int) -> str:
    from dashboards.models import Checkpoint  # the router is imported with the settings, before the apps

    url = Checkpoint.objects.filter(pk=checkpoint_id).values_list("url", flat=True).first()
    return sync_queue_for(url or "")
