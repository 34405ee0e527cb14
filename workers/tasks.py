"""Celery tasks: thin shells that turn ids into calls of plain functions (workers.sync, workers.state_fanout,
workers.state_sampling, workers.maintenance_runs, workers.retention). Their queues: workers.routing."""

import os

from celery import shared_task
from django.utils import timezone

from . import eventlogs, maintenance_runs, retention, state_fanout, state_sampling, sync


@shared_task(acks_late=True)
def sync_checkpoint(checkpoint_id: int) -> None:
    """Bring one checkpoint's rows up to date with its storage (skipped if another worker holds it),
    then queue the row counting of the state scan its full pass started, if any."""
    run = sync.sync_checkpoint(checkpoint_id, worker=sync_checkpoint.request.hostname or "")
    if run is not None:
        for chunk_id in state_fanout.chunks_to_count(run):
            count_state_rows.delay(chunk_id)


@shared_task(acks_late=True)
def count_state_rows(chunk_id: int) -> None:
    """Count the state rows of one chunk of a checkpoint's partitions (a fanned-out full pass)."""
    state_fanout.count_state_chunk(chunk_id, worker=count_state_rows.request.hostname or "")


@shared_task(acks_late=True)
def sample_state_partition(sample_id: int) -> None:
    """Decode sample rows of a state partition for its page."""
    state_sampling.take_state_sample(sample_id)


@shared_task
def tail_event_logs() -> None:
    """Read new streaming-query progress from every registered event-log directory (celery beat)."""
    eventlogs.tail_all_event_log_directories()


@shared_task(acks_late=True)
def plan_maintenance(run_id: int) -> None:
    """Compute and store the plan of a requested maintenance run."""
    maintenance_runs.make_plan(run_id)


@shared_task(acks_late=True)
def run_maintenance(run_id: int) -> None:
    """Apply a confirmed maintenance run (or resume one whose worker died)."""
    maintenance_runs.execute_run(run_id, owner=f"{run_maintenance.request.hostname or 'worker'}:{os.getpid()}")


@shared_task
def resume_interrupted_maintenance() -> None:
    """Hand runs whose worker died, or whose queued or planning task was lost, to a live worker (celery beat)."""
    for run_id in maintenance_runs.interrupted_run_ids():
        run_maintenance.delay(run_id)
    for run_id in maintenance_runs.unplanned_run_ids():
        plan_maintenance.delay(run_id)


@shared_task(acks_late=True)
def run_maintenance_policy(policy_id: int) -> None:
    """A scheduled policy: plan, and run only when every precondition holds (celery beat)."""
    run_id = maintenance_runs.start_policy_run(policy_id)
    if run_id is not None:
        run_maintenance.delay(run_id)


@shared_task
def prune_history() -> dict[str, int]:
    """Keep sync runs and inventory passes bounded (celery beat, hourly; workers.retention)."""
    return retention.prune_history(timezone.now())
