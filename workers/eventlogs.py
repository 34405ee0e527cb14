"""Tail the registered Spark event-log directories into BatchProgress rows.

Each directory keeps a position per event log, so a tail reads only what Spark appended (and
never a finished file again). A log that fails to read is recorded with its reason and keeps its
old position; the other logs, and the other directories, are read regardless.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from dashboards.models import BatchProgress, EventLogDirectory, QueryRun, StreamingQuery
from dashboards.query_page.runtime_series import refresh_runtime_rollups
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.eventlog import EventLogPosition, find_event_logs, tail_event_log
from workers.checkpoint.progress import QueryIdleEvent, QueryProgressEvent, QueryStartedEvent, QueryTerminatedEvent
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.storage_options import open_storage


def tail_all_event_log_directories() -> int:
    """Tail every enabled directory; return how many progress events were stored."""
    return sum(
        tail_event_log_directory(pk)
        for pk in EventLogDirectory.objects.filter(is_enabled=True).values_list("pk", flat=True)
    )


def tail_event_log_directory(directory_id: int) -> int:
    directory = EventLogDirectory.objects.get(pk=directory_id)
    stored = 0
    try:
        storage = open_storage(directory.url)
        logs = find_event_logs(storage)
    except CheckpointError as exc:
        directory.errors = {"": str(exc)}
    else:
        directory.errors = {}
        for log in logs:
            stored += _tail_one(storage, directory, log)
    directory.last_tailed_at = timezone.now()
    directory.progress_events_read += stored
    directory.save(update_fields=["positions", "errors", "last_tailed_at", "progress_events_read"])
    return stored


def _tail_one(storage: CheckpointStorage, directory: EventLogDirectory, log) -> int:
    known = directory.positions.get(log.name)
    try:
        tail = tail_event_log(storage, log, EventLogPosition.from_dict(known) if known else None)
    except CheckpointError as exc:
        directory.errors[log.name] = str(exc)
        return 0
    stored_batches: dict[int, set[int]] = {}  # query pk: batch ids whose progress was stored
    with transaction.atomic():
        stored = sum(_store_event(event, stored_batches) for event in tail.events)
        for query_pk, batch_ids in stored_batches.items():
            refresh_runtime_rollups(query_pk, batch_ids)
    directory.positions[log.name] = tail.position.as_dict()
    return stored


def _store_event(event, stored_batches: dict[int, set[int]]) -> int:
    if isinstance(event, QueryProgressEvent):
        row, _ = BatchProgress.objects.store(event.progress, origin=BatchProgress.Origin.EVENT_LOG)
        stored_batches.setdefault(row.query_id, set()).add(row.batch_id)
        return 1
    if isinstance(event, QueryIdleEvent):
        QueryRun.objects.record_idle(event.id, event.run_id, event.timestamp)
        return 0
    query, _ = StreamingQuery.objects.get_or_create(query_id=event.id)
    run, _ = QueryRun.objects.get_or_create(run_id=event.run_id, defaults={"query": query})
    if isinstance(event, QueryStartedEvent) and event.timestamp is not None:
        run.started_at = event.timestamp
    elif isinstance(event, QueryTerminatedEvent):
        run.ended_at = timezone.now()
    run.save()
    return 0
