"""A sync's writes: what it read (SyncFindings, BeyondLogs) stored as rows in one transaction per
chunk of batches: the batches and their commits, the query and the reconcile's findings, the
issues of files it could not read, the health figures and the run's totals; and a failed run
recorded as such. workers.sync reads; this module stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from dashboards.models import Batch, Checkpoint, StatePartition, StreamingQuery, SyncIssue, SyncRun, ms_to_datetime
from dashboards.query_page.timeline_rollups import refresh_timeline_rollups
from workers.checkpoint.commits import CommitMetadata
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.offsets import OffsetSeq
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.inspection import (
    Inspection,
    store_inspection,
)
from workers.probe_pass import ProbePass, store_probe_pass
from workers.state_follow import store_state_follow
from workers.status_figures import refresh_status_figures


@dataclass
class SyncFindings:
    """What one pass over storage found, before it is written to the database."""

    query_id: str | None = None
    new_offsets: dict[int, OffsetSeq] = field(default_factory=dict)
    new_commits: dict[int, CommitMetadata] = field(default_factory=dict)
    problems: dict[str, CheckpointError] = field(default_factory=dict)
    is_reconcile: bool = False
    earliest_batch_id: int | None = None  # lowest offsets/N listed by a reconcile
    # What the path holds when it is no checkpoint (the health model's "not a checkpoint"), or "".
    root_problem: str = ""
    # Batches and commits a reconcile already stored in chunks (no longer in new_offsets/new_commits).
    stored_batches: int = 0
    stored_commits: int = 0


@dataclass
class BeyondLogs:
    """What a sync read beyond offsets/ and commits/: the full walk's inspection, or the state
    follow's rows and the probe pass between walks (None when not due)."""

    inspection: Inspection | None = None
    followed_state: list[StatePartition] = field(default_factory=list)
    probe: ProbePass | None = None


def _batch_row(
    checkpoint: Checkpoint, batch_id: int, offset_seq: OffsetSeq, commit: CommitMetadata | None
) -> dict[str, Any]:
    """The column values of a new Batch row (see BatchQuerySet.insert_rows)."""
    metadata = offset_seq.metadata
    row = {
        "checkpoint_id": checkpoint.pk,
        "batch_id": batch_id,
        "offset_log_version": offset_seq.version,
        "timestamp_ms": metadata.batch_timestamp_ms if metadata else 0,
        "watermark_ms": metadata.batch_watermark_ms if metadata else 0,
        "conf": dict(metadata.conf) if metadata else {},
        "sources": list(offset_seq.offsets),
        "source_ids": list(offset_seq.source_ids) if offset_seq.source_ids is not None else None,
    }
    if commit is not None:
        row.update(_commit_columns(commit))
    return row


def _commit_columns(commit: CommitMetadata) -> dict[str, Any]:
    extra = {"stateUniqueIds": commit.state_unique_ids, "sinkMetadataMap": commit.sink_metadata}
    return {
        "is_committed": True,
        "commit_log_version": commit.version,
        "next_batch_watermark_ms": commit.next_batch_watermark_ms,
        "commit_metadata": {key: value for key, value in extra.items() if value} or None,
    }


@transaction.atomic
def store_findings(
    checkpoint: Checkpoint,
    run: SyncRun,
    storages: list[CheckpointStorage | None],
    findings: SyncFindings,
    beyond: BeyondLogs,
) -> None:
    _store_query_and_reconcile(checkpoint, run, findings)
    store_batches(checkpoint, findings.new_offsets, findings.new_commits)
    _record_issues(checkpoint, findings.problems, run.started_at)
    _refresh_health(checkpoint, run.started_at, findings)
    refresh_status_figures(checkpoint, run.started_at)
    _store_beyond_logs(checkpoint, beyond, run.started_at)
    _finish_run(run, [s for s in storages if s is not None], findings)


def _store_query_and_reconcile(checkpoint: Checkpoint, run: SyncRun, findings: SyncFindings) -> None:
    """The query the checkpoint belongs to, and when a reconcile last read its history (and from where)."""
    if findings.query_id:
        checkpoint.query, _ = StreamingQuery.objects.get_or_create(query_id=findings.query_id)
        checkpoint.save(update_fields=["query"])
    if findings.is_reconcile:
        checkpoint.last_reconciled_at = run.started_at
        checkpoint.earliest_stored_batch_id = findings.earliest_batch_id
        checkpoint.save(update_fields=["last_reconciled_at", "earliest_stored_batch_id"])


def _store_beyond_logs(checkpoint: Checkpoint, beyond: BeyondLogs, now: datetime) -> None:
    """What the sync read past the logs: a full inspection, the followed state, a probe pass."""
    if beyond.inspection is not None:
        store_inspection(checkpoint, beyond.inspection, now)
    store_state_follow(checkpoint, beyond.followed_state)
    if beyond.probe is not None:
        store_probe_pass(checkpoint, beyond.probe, checkpoint.latest_batch_id, now)


def store_batches(
    checkpoint: Checkpoint, new_offsets: dict[int, OffsetSeq], new_commits: dict[int, CommitMetadata]
) -> None:
    """Insert the new batches; mark the known ones whose commit arrived late."""
    Batch.objects.insert_rows(
        _batch_row(checkpoint, batch_id, offset_seq, new_commits.get(batch_id))
        for batch_id, offset_seq in sorted(new_offsets.items())
    )
    late_commits = {b: c for b, c in new_commits.items() if b not in new_offsets}
    committed_late = list(checkpoint.batches.filter(batch_id__in=late_commits).values_list("batch_id", flat=True))
    for batch_id in committed_late:
        checkpoint.batches.filter(batch_id=batch_id).update(**_commit_columns(late_commits[batch_id]))
    # The timeline's roll-ups: one bucket per tier per new row or commit (none when nothing changed).
    refresh_timeline_rollups(checkpoint.pk, [*new_offsets, *committed_late])


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
            create_defaults={
                "error_type": type(exc).__name__,
                "reason": str(exc),
                "first_seen_at": now,
                "last_seen_at": now,
            },
        )
    checkpoint.issues.open().exclude(path__in=list(problems)).update(resolved_at=now)


def _refresh_health(checkpoint: Checkpoint, now: datetime, findings: SyncFindings) -> None:
    """Update the health figures: counted from the rows by a reconcile, by difference after a probe.

    Only syncs write Batch rows, one at a time under the lease, so the difference is exact; the
    count over every row (a scan of the history) is left to the reconcile, which resets any drift.
    """
    _update_uncommitted_count(checkpoint, findings)
    _set_latest_batches(checkpoint)
    checkpoint.last_synced_at = now
    checkpoint.root_problem = findings.root_problem
    checkpoint.save(
        update_fields=[
            "latest_batch_id",
            "latest_batch_at",
            "latest_committed_batch_id",
            "uncommitted_batch_count",
            "last_synced_at",
            "root_problem",
        ]
    )


def _update_uncommitted_count(checkpoint: Checkpoint, findings: SyncFindings) -> None:
    if findings.is_reconcile:
        checkpoint.uncommitted_batch_count = checkpoint.batches.uncommitted().count()
    else:
        late_commits = sum(1 for batch_id in findings.new_commits if batch_id not in findings.new_offsets)
        new_uncommitted = sum(1 for batch_id in findings.new_offsets if batch_id not in findings.new_commits)
        checkpoint.uncommitted_batch_count += new_uncommitted - late_commits


def _set_latest_batches(checkpoint: Checkpoint) -> None:
    """The latest batch (its id and start) and the latest committed one, from the stored rows."""
    # Index lookups from the top of unique (checkpoint, batch_id), not aggregates over every row.
    batches = checkpoint.batches.order_by("-batch_id")
    latest = batches.values_list("batch_id", "timestamp_ms").first()
    checkpoint.latest_batch_id, latest_ms = latest if latest else (None, None)
    checkpoint.latest_batch_at = ms_to_datetime(latest_ms)
    checkpoint.latest_committed_batch_id = batches.filter(is_committed=True).values_list("batch_id", flat=True).first()


def _finish_run(run: SyncRun, storages: list[CheckpointStorage], findings: SyncFindings) -> None:
    calls = [storage.calls for storage in storages]
    run.finished_at = timezone.now()
    run.status = SyncRun.Status.PARTIAL if findings.problems else SyncRun.Status.OK
    run.files_read = sum(c.read for c in calls)
    run.bytes_read = sum(c.bytes_read for c in calls)
    run.list_calls = sum(c.list for c in calls)
    run.info_calls = sum(c.info for c in calls)
    run.read_calls = sum(c.read for c in calls)
    run.new_batches = findings.stored_batches + len(findings.new_offsets)
    run.new_commits = findings.stored_commits + len(findings.new_commits)
    run.error_count = len(findings.problems)
    run.save()


def store_failure(checkpoint: Checkpoint, run: SyncRun, exc: Exception) -> None:
    if isinstance(exc, CheckpointError):
        _record_issues(checkpoint, {"": exc}, run.started_at)
    run.finished_at = timezone.now()
    run.status = SyncRun.Status.FAILED
    run.error_count = 1
    run.message = str(exc)
    run.save()
