"""Bring one checkpoint's rows up to date with its storage, reading only files not read before.

A sync lists offsets/ and commits/ (two LIST calls), reads the offsets/N files that have no Batch
row yet and the commits/N files of batches not yet known as committed, and records what it did in
a SyncRun. Files that cannot be read become SyncIssue rows; the sync goes on with the others.
Spark writes offsets/N and commits/N once and never rewrites them, so a file read is never read
again. Rows of batches Spark has since purged are kept: they are the query's history.
"""
from __future__ import annotations

import contextlib
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from dashboards.models import Batch, Checkpoint, StreamingQuery, SyncIssue, SyncRun, ms_to_datetime
from workers.inspection import Inspection, inspection_due, read_inspection, sink_log_storage, store_inspection
from workers.checkpoint import (
    CheckpointError,
    CheckpointStorage,
    CommitMetadata,
    OffsetSeq,
    find_stream_metadata,
    list_batch_ids,
    read_commit,
    read_offset_seq,
)


@dataclass
class SyncFindings:
    """What one pass over storage found, before it is written to the database."""

    query_id: str | None = None
    new_offsets: dict[int, OffsetSeq] = field(default_factory=dict)
    new_commits: dict[int, CommitMetadata] = field(default_factory=dict)
    problems: dict[str, CheckpointError] = field(default_factory=dict)


def sync_checkpoint(checkpoint_id: int, *, worker: str = "", now: datetime | None = None) -> SyncRun | None:
    """Sync one checkpoint; return its SyncRun, or None when it is gone or another worker holds it."""
    now = now or timezone.now()
    owner = f"{worker or socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    taken = Checkpoint.objects.take_sync_lease(checkpoint_id, owner=owner, now=now, seconds=settings.SYNC_LEASE_SECONDS)
    if not taken:
        return None
    try:
        checkpoint = Checkpoint.objects.get(pk=checkpoint_id)
        run = SyncRun.objects.create(checkpoint=checkpoint, started_at=now, worker=worker)
        _sync_into(checkpoint, run)
        return run
    finally:
        Checkpoint.objects.release_sync_lease(checkpoint_id, owner=owner)


def _sync_into(checkpoint: Checkpoint, run: SyncRun) -> None:
    try:
        storage = CheckpointStorage(checkpoint.url, allowed_roots=settings.CHECKPOINT_ROOTS)
        findings = SyncFindings()
        _read_new_files(checkpoint, storage, findings)
        sink = sink_log_storage(checkpoint)
        inspection = None
        if inspection_due(checkpoint, run.started_at):
            inspection = read_inspection(storage, sink, checkpoint, findings.new_commits)
        _store_findings(checkpoint, run, [storage, sink], findings, inspection)
    except CheckpointError as exc:
        # The checkpoint as a whole could not be read (its root is outside the allowed ones, say).
        _store_failure(checkpoint, run, exc)
    except Exception as exc:
        # A bug or an outage of the database: leave no run marked "running" if the database lets
        # us, then let Celery log the original error.
        with contextlib.suppress(DatabaseError):
            _store_failure(checkpoint, run, exc)
        raise


def _read_new_files(checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings) -> None:
    if checkpoint.query_id is None:
        findings.query_id = _find_query_id(storage, findings)
    offset_ids = list_batch_ids(storage, "offsets")
    commit_ids = set(list_batch_ids(storage, "commits"))
    known = _known_batch_ids(checkpoint, offset_ids)
    for batch_id in offset_ids:
        if batch_id not in known:
            _collect(findings.new_offsets, findings, batch_id, f"offsets/{batch_id}", read_offset_seq, storage)
    to_commit = commit_ids & (set(findings.new_offsets) | _uncommitted_batch_ids(checkpoint, commit_ids))
    for batch_id in sorted(to_commit):
        _collect(findings.new_commits, findings, batch_id, f"commits/{batch_id}", read_commit, storage)


def _collect(into: dict, findings: SyncFindings, batch_id: int, path: str, reader, storage: CheckpointStorage) -> None:
    try:
        into[batch_id] = reader(storage, batch_id)
    except CheckpointError as exc:
        findings.problems[path] = exc


def _find_query_id(storage: CheckpointStorage, findings: SyncFindings) -> str | None:
    try:
        metadata = find_stream_metadata(storage)
    except CheckpointError as exc:
        findings.problems["metadata"] = exc
        return None
    return None if metadata is None else metadata.id


def _known_batch_ids(checkpoint: Checkpoint, listed: list[int]) -> set[int]:
    if not listed:
        return set()
    rows = checkpoint.batches.filter(batch_id__gte=listed[0], batch_id__lte=listed[-1])
    return set(rows.values_list("batch_id", flat=True))


def _uncommitted_batch_ids(checkpoint: Checkpoint, commit_ids: set[int]) -> set[int]:
    if not commit_ids:
        return set()
    rows = checkpoint.batches.uncommitted().filter(batch_id__gte=min(commit_ids), batch_id__lte=max(commit_ids))
    return set(rows.values_list("batch_id", flat=True))


def _batch_row(checkpoint: Checkpoint, batch_id: int, offset_seq: OffsetSeq, commit: CommitMetadata | None) -> Batch:
    metadata = offset_seq.metadata
    batch = Batch(
        checkpoint=checkpoint,
        batch_id=batch_id,
        offset_log_version=offset_seq.version,
        timestamp_ms=metadata.batch_timestamp_ms if metadata else 0,
        watermark_ms=metadata.batch_watermark_ms if metadata else 0,
        conf=dict(metadata.conf) if metadata else {},
        sources=list(offset_seq.offsets),
        source_ids=list(offset_seq.source_ids) if offset_seq.source_ids is not None else None,
    )
    if commit is not None:
        _apply_commit(batch, commit)
    return batch


def _apply_commit(batch: Batch, commit: CommitMetadata) -> None:
    batch.is_committed = True
    batch.commit_log_version = commit.version
    batch.next_batch_watermark_ms = commit.next_batch_watermark_ms
    extra = {"stateUniqueIds": commit.state_unique_ids, "sinkMetadataMap": commit.sink_metadata}
    batch.commit_metadata = {key: value for key, value in extra.items() if value} or None


@transaction.atomic
def _store_findings(
    checkpoint: Checkpoint,
    run: SyncRun,
    storages: list[CheckpointStorage | None],
    findings: SyncFindings,
    inspection: Inspection | None,
) -> None:
    if findings.query_id:
        checkpoint.query, _ = StreamingQuery.objects.get_or_create(query_id=findings.query_id)
        checkpoint.save(update_fields=["query"])
    Batch.objects.bulk_create(
        _batch_row(checkpoint, batch_id, offset_seq, findings.new_commits.get(batch_id))
        for batch_id, offset_seq in sorted(findings.new_offsets.items())
    )
    late_commits = {b: c for b, c in findings.new_commits.items() if b not in findings.new_offsets}
    for batch in checkpoint.batches.filter(batch_id__in=late_commits):
        _apply_commit(batch, late_commits[batch.batch_id])
        batch.save(update_fields=["is_committed", "commit_log_version", "next_batch_watermark_ms", "commit_metadata"])
    _record_issues(checkpoint, findings.problems, run.started_at)
    _refresh_health(checkpoint, run.started_at)
    if inspection is not None:
        store_inspection(checkpoint, inspection, run.started_at)
    _finish_run(run, [s for s in storages if s is not None], findings)


def _record_issues(checkpoint: Checkpoint, problems: dict[str, CheckpointError], now: datetime) -> None:
    """Upsert one issue per unreadable file; resolve the ones this sync no longer met.

    Unreadable files are read again on every sync (they never become rows), so an issue that was
    not reported again means the file was read fine or has gone.
    """
    for path, exc in problems.items():
        SyncIssue.objects.update_or_create(
            checkpoint=checkpoint,
            path=path,
            defaults={"error_type": type(exc).__name__, "reason": str(exc), "last_seen_at": now, "resolved_at": None},
            create_defaults={"error_type": type(exc).__name__, "reason": str(exc), "first_seen_at": now, "last_seen_at": now},
        )
    checkpoint.issues.open().exclude(path__in=list(problems)).update(resolved_at=now)


def _refresh_health(checkpoint: Checkpoint, now: datetime) -> None:
    figures = checkpoint.batches.aggregate(
        latest=Max("batch_id"),
        latest_committed=Max("batch_id", filter=Q(is_committed=True)),
        uncommitted=Count("id", filter=Q(is_committed=False)),
    )
    latest = checkpoint.batches.filter(batch_id=figures["latest"]).values_list("timestamp_ms", flat=True).first()
    checkpoint.latest_batch_id = figures["latest"]
    checkpoint.latest_batch_at = ms_to_datetime(latest)
    checkpoint.latest_committed_batch_id = figures["latest_committed"]
    checkpoint.uncommitted_batch_count = figures["uncommitted"]
    checkpoint.last_synced_at = now
    checkpoint.save(
        update_fields=["latest_batch_id", "latest_batch_at", "latest_committed_batch_id", "uncommitted_batch_count", "last_synced_at"]
    )


def _finish_run(run: SyncRun, storages: list[CheckpointStorage], findings: SyncFindings) -> None:
    calls = [storage.calls for storage in storages]
    run.finished_at = timezone.now()
    run.status = SyncRun.Status.PARTIAL if findings.problems else SyncRun.Status.OK
    run.files_read = sum(c.read for c in calls)
    run.bytes_read = sum(c.bytes_read for c in calls)
    run.list_calls = sum(c.list for c in calls)
    run.info_calls = sum(c.info for c in calls)
    run.read_calls = sum(c.read for c in calls)
    run.new_batches = len(findings.new_offsets)
    run.new_commits = len(findings.new_commits)
    run.error_count = len(findings.problems)
    run.save()


def _store_failure(checkpoint: Checkpoint, run: SyncRun, exc: Exception) -> None:
    if isinstance(exc, CheckpointError):
        _record_issues(checkpoint, {"": exc}, run.started_at)
    run.finished_at = timezone.now()
    run.status = SyncRun.Status.FAILED
    run.error_count = 1
    run.message = str(exc)
    run.save()
