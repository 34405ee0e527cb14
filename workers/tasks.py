"""Celery tasks: thin shells that turn ids into calls of plain functions (workers.sync, workers.state_sampling)."""
from celery import shared_task

from . import eventlogs, state_sampling, sync


@shared_task(acks_late=True)
def sync_checkpoint(checkpoint_id: int) -> None:
    """Bring one checkpoint's rows up to date with its storage (skipped if another worker holds it)."""
    sync.sync_checkpoint(checkpoint_id, worker=sync_checkpoint.request.hostname or "")


@shared_task(acks_late=True)
def sample_state_partition(sample_id: int) -> None:
    """Decode sample rows of a state partition for its page."""
    state_sampling.take_state_sample(sample_id)


@shared_task
def tail_event_logs() -> None:
    """Read new streaming-query progress from every registered event-log directory (celery beat)."""
    eventlogs.tail_all_event_log_directories()
