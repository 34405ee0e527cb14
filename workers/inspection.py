"""The full pass over a checkpoint, run with a sync every INSPECT_INTERVAL_SECONDS.

A sync reads only new offsets and commits. This pass looks at everything else that needs a
listing of whole directories, so it runs less often: the compactible logs (each file source's
``sources/<i>`` and the file sink's ``_spark_metadata``, whose ``.compact`` files are remembered
after Spark deletes them, so their growth stays visible), the file inventory, and the integrity
checks. Reading happens before the database transaction; storing happens inside it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from dashboards.models import Checkpoint, CompactFile, Finding, MetadataLog
from workers.checkpoint import (
    CheckpointError,
    CheckpointStorage,
    MetadataLogSummary,
    file_source_log_dirs,
    read_metadata_log,
    sink_log_location,
)

UNREADABLE_LOG = "unreadable-metadata-log"
UNREADABLE_LOG_IMPACT = "Spark fails when it reads this log: a restarted query stops with the same error."


@dataclass(frozen=True)
class FindingRow:
    """One finding as stored: the integrity checks' findings and the logs this pass could not read."""

    code: str
    severity: int
    path: str
    message: str
    restart_impact: str


@dataclass
class Inspection:
    """What one full pass read, before it is written to the database."""

    metadata_logs: list[MetadataLogSummary] = field(default_factory=list)
    findings: list[FindingRow] = field(default_factory=list)


def inspection_due(checkpoint: Checkpoint, now: datetime) -> bool:
    last = checkpoint.last_inspected_at
    return last is None or now - last >= timedelta(seconds=settings.INSPECT_INTERVAL_SECONDS)


def sink_log_storage(checkpoint: Checkpoint) -> CheckpointStorage | None:
    if not checkpoint.sink_log_url:
        return None
    return CheckpointStorage(checkpoint.sink_log_url, allowed_roots=settings.CHECKPOINT_ROOTS)


def read_inspection(storage: CheckpointStorage, sink: CheckpointStorage | None, latest_offsets: list[str | None]) -> Inspection:
    """Read the compactible logs of the checkpoint (and of its file sink when one is registered).

    ``latest_offsets`` are the latest batch's source offsets as written: they tell which
    ``sources/<i>`` are file sources.
    """
    inspection = Inspection()
    for dirname in file_source_log_dirs([_json_or_none(offset) for offset in latest_offsets]):
        _read_log(inspection, storage, dirname, "source", label=dirname)
    if sink is not None:
        dirname, label = sink_log_location(sink)
        _read_log(inspection, sink, dirname, "sink", label=label)
    return inspection


def store_inspection(checkpoint: Checkpoint, inspection: Inspection, now: datetime) -> None:
    """Upsert logs, compact files and findings; resolve what this pass no longer found (in a transaction)."""
    seen = [_store_log(checkpoint, summary, now).pk for summary in inspection.metadata_logs]
    unreadable = [finding.path for finding in inspection.findings if finding.code == UNREADABLE_LOG]
    # A log that could not be read this time keeps its last good figures.
    checkpoint.metadata_logs.exclude(pk__in=seen).exclude(path__in=unreadable).delete()
    _store_findings(checkpoint, inspection.findings, now)
    checkpoint.last_inspected_at = now
    checkpoint.save(update_fields=["last_inspected_at"])


def _store_findings(checkpoint: Checkpoint, findings: list[FindingRow], now: datetime) -> None:
    current = Q()
    for row in findings:
        Finding.objects.update_or_create(
            checkpoint=checkpoint,
            code=row.code,
            path=row.path,
            defaults={
                "severity": row.severity,
                "message": row.message,
                "restart_impact": row.restart_impact,
                "last_seen_at": now,
                "resolved_at": None,
            },
            create_defaults={
                "severity": row.severity,
                "message": row.message,
                "restart_impact": row.restart_impact,
                "first_seen_at": now,
                "last_seen_at": now,
            },
        )
        current |= Q(code=row.code, path=row.path)
    stale = checkpoint.findings.open()
    if findings:
        stale = stale.exclude(current)
    stale.update(resolved_at=now)


def _json_or_none(offset: str | None):
    try:
        return None if offset is None else json.loads(offset)
    except ValueError:
        return None


def _read_log(inspection: Inspection, storage: CheckpointStorage, dirname: str, kind: str, *, label: str) -> None:
    try:
        summary = read_metadata_log(storage, dirname, kind=kind)  # type: ignore[arg-type]
    except CheckpointError as exc:
        inspection.findings.append(
            FindingRow(UNREADABLE_LOG, Finding.Severity.ERROR, label, str(exc), UNREADABLE_LOG_IMPACT)
        )
        return
    inspection.metadata_logs.append(replace(summary, path=label))


def _store_log(checkpoint: Checkpoint, summary: MetadataLogSummary, now: datetime) -> MetadataLog:
    log, _ = MetadataLog.objects.update_or_create(
        checkpoint=checkpoint,
        path=summary.path,
        defaults={
            "kind": summary.kind,
            "compact_interval": summary.compact_interval,
            "latest_batch_id": summary.latest_batch,
            "live_entries": summary.live_entries,
            "latest_compact_bytes": summary.latest_compact_bytes,
            "updated_at": now,
        },
    )
    CompactFile.objects.bulk_create(
        [CompactFile(log=log, batch_id=batch_id, size_bytes=size, first_seen_at=now) for batch_id, size in summary.compact_file_bytes],
        ignore_conflicts=True,
    )
    return log
