"""Celery tasks: thin shells that turn ids into calls of plain functions in workers.sync."""
from celery import shared_task

from . import sync


@shared_task(acks_late=True)
def sync_checkpoint(checkpoint_id: int) -> None:
    """Bring one checkpoint's rows up to date with its storage (skipped if another worker holds it)."""
    sync.sync_checkpoint(checkpoint_id, worker=sync_checkpoint.request.hostname or "")
