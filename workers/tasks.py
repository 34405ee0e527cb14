"""Celery tasks: thin shells that turn ids into calls of plain functions (workers.sync, workers.state_fanout,
workers.state_sampling, workers.maintenance_runs, workers.retention, workers.backup_retention,
workers.rollup_builds).
Their queues: workers.routing."""

import logging
import os

from celery import shared_task
from celery.signals import worker_ready
from django.utils import timezone
from kombu.exceptions import OperationalError

from . import (
    backup_retention,
    eventlogs,
    maintenance_runs,
    retention,
    rollup_builds,
    state_fanout,
    state_sampling,
    sync,
)

logger = logging.getLogger(__name__)


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
def prune_maintenance_backups() -> dict[str, int]:
    """Delete risky runs' backups past their retention (celery beat, hourly; workers.backup_retention)."""
    return backup_retention.prune_expired_backups(timezone.now())


@shared_task
def prune_history() -> dict[str, int]:
    """Keep sync runs and inventory passes bounded (celery beat, hourly; workers.retention)."""
    return retention.prune_history(timezone.now())


@shared_task
def build_missing_rollups() -> None:
    """Queue the build of every owner's missing chart roll-ups (celery beat, each minute, and a worker's start)."""
    # owners_lacking_rollups() gives (checkpoint ids, query ids): the timeline's and the Runtime charts' owners.
    builds = (build_timeline_rollups, build_runtime_rollups)
    for build, owner_ids in zip(builds, rollup_builds.owners_lacking_rollups(), strict=True):
        for owner_id in owner_ids:
            build.delay(owner_id)


@shared_task(acks_late=True)
def build_timeline_rollups(checkpoint_id: int) -> None:
    """Build the next chunk of a checkpoint's timeline roll-ups, and queue the one after (workers.rollup_builds)."""
    if rollup_builds.build_timeline_chunk(checkpoint_id) == rollup_builds.MORE:
        build_timeline_rollups.delay(checkpoint_id)


@shared_task(acks_late=True)
def build_runtime_rollups(query_id: int) -> None:
    """Build the next chunk of a query's Runtime chart roll-ups, and queue the one after (workers.rollup_builds)."""
    if rollup_builds.build_runtime_chunk(query_id) == rollup_builds.MORE:
        build_runtime_rollups.delay(query_id)


@worker_ready.connect
def build_rollups_at_start(sender=None, **_) -> None:
    """A deployment just upgraded has history without roll-ups: start building them now, not at beat's next minute."""
    try:
        build_missing_rollups.delay()
    except OperationalError as exc:  # the broker went away meanwhile: beat sends it within a minute
        logger.warning("roll-up builds not queued at worker start: %s", exc)
