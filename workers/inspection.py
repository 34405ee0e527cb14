"""The full walk over a checkpoint: on registration, on request from the query page, when a probe
between walks finds what it cannot explain (workers.probe_pass), and every FULL_WALK_INTERVAL_SECONDS.

A sync reads only new offsets and commits, and between walks probes the names Spark writes
beyond them (workers.probe_pass). This walk lists every directory, so its calls grow with the
retained files. One walk (``integrity.gather.gather_facts``: a recursive listing plus the files Spark reads at a
restart) feeds three things: the integrity findings, the file inventory, and the compactible
logs (each file source's ``sources/<i>`` and the registered file sink's ``_spark_metadata``),
whose ``.compact`` files are remembered after Spark deletes them so their growth stays visible.
Reading happens before the database transaction; storing happens inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q

from dashboards.health.query_status import Thresholds, stall_seconds
from dashboards.models import Checkpoint, CompactFile, DirectoryInventory, Finding, MetadataLog
from workers.checkpoint.integrity.checks import run_checks
from workers.checkpoint.integrity.facts import CheckpointFacts
from workers.checkpoint.integrity.findings import Finding as CheckFinding
from workers.checkpoint.integrity.gather import gather_facts
from workers.checkpoint.integrity.running import RUNNING_BATCH_CODES, hold_back_running_batch
from workers.checkpoint.inventory import DirectoryInventory as InventoryRow
from workers.checkpoint.inventory import TreeListing, build_inventory
from workers.checkpoint.metadatalog import MetadataLogSummary
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statesummary import StatePartitionSummary, state_conf, summarize_state_stores
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.intervals import interval_passed
from workers.state_fanout import fanout_needed, start_state_scan
from workers.state_partitions import (
    delete_state_partitions_except,
    refresh_state_totals,
    store_state_partitions,
    stored_state_commits,
)
from workers.status_figures import rhythm_of
from workers.storage_options import open_storage

SEVERITY = {"error": Finding.Severity.ERROR, "warning": Finding.Severity.WARNING, "info": Finding.Severity.INFO}


@dataclass
class Inspection:
    """What one full pass read, before it is written to the database."""

    metadata_logs: list[MetadataLogSummary] = field(default_factory=list)
    inventory: list[InventoryRow] = field(default_factory=list)
    findings: list[CheckFinding] = field(default_factory=list)
    state: list[StatePartitionSummary] = field(default_factory=list)
    # Logs that exist but could not be read this time: they keep their last good figures.
    unreadable_logs: list[str] = field(default_factory=list)
    # Too many partitions to count their rows here: workers count them at this version
    # (workers.state_fanout); `state` then holds the file figures only.
    fanned_out_rows_version: int | None = None
    rows_fanned_out: bool = False
    # The newest offsets/N the walk saw: the batch the pass's figures are as of (None: no batch yet).
    batch_id: int | None = None


def full_walk_due(checkpoint: Checkpoint, now: datetime) -> bool:
    """On registration (never walked), when asked for on the query page, and every FULL_WALK_INTERVAL_SECONDS."""
    if checkpoint.full_walk_requested_at is not None:
        return True
    return interval_passed(checkpoint.last_inspected_at, now, settings.FULL_WALK_INTERVAL_SECONDS)


def sink_log_storage(checkpoint: Checkpoint) -> CheckpointStorage | None:
    if not checkpoint.sink_log_url:
        return None
    return open_storage(checkpoint.sink_log_url)


def walk_checkpoint(
    storage: CheckpointStorage, sink: CheckpointStorage | None, checkpoint: Checkpoint
) -> CheckpointFacts:
    """List the checkpoint (and the sink's log) once and read what a restart reads; never raises for damage.

    A reconcile due in the same sync takes its listing of offsets/ and commits/ from this walk
    (``listing_of_logs``) instead of listing them again.
    """
    return gather_facts(storage, sink_log=sink, default_compact_interval=checkpoint.file_log_compact_interval)


def listing_of_logs(facts: CheckpointFacts | None) -> TreeListing | None:
    """The walk's listing when it listed every directory, for the reconcile; None otherwise
    (a directory that failed would look empty, where listing it again reports why)."""
    return None if facts is None or facts.listing.failures else facts.listing


def read_inspection(
    storage: CheckpointStorage,
    facts: CheckpointFacts,
    checkpoint: Checkpoint,
    new_commits: Mapping[int, Any],
    now: datetime,
) -> Inspection:
    """Turn the walk's facts into findings, inventory and logs, then size the state.

    State rows are counted at the version a restart loads (newest committed batch + 1), with
    the codec and row-checksum setting the newest offsets file pinned. ``new_commits`` are the
    commits this sync just read (not stored yet): with the stored ones they give the unique ids
    of RocksDB checkpoint format 2. Findings about a newest batch that may still be running wait
    until it is overdue by the query's own rhythm (``settled_findings``).
    """
    logs = _metadata_log_summaries(facts)
    inventory = build_inventory(facts.listing, sink_log=facts.sink_listing, sink_log_path=_sink_path(facts))
    state, fanned_out_version, fan_out = _state_of(storage, facts, checkpoint, new_commits)
    unreadable = [log.path for log in facts.logs if log.outcome.error is not None]
    findings = settled_findings(facts, checkpoint, now)
    batch_id = facts.offset_ids[-1] if facts.offset_ids else None
    return Inspection(logs, inventory, findings, state, unreadable, fanned_out_version, fan_out, batch_id)


def _metadata_log_summaries(facts: CheckpointFacts) -> list[MetadataLogSummary]:
    """The compactible logs the walk read, each named by its path."""
    return [
        replace(log.outcome.value, path=log.path)
        for log in facts.logs
        if isinstance(log.outcome.value, MetadataLogSummary)
    ]


def _state_of(
    storage: CheckpointStorage, facts: CheckpointFacts, checkpoint: Checkpoint, new_commits: Mapping[int, Any]
) -> tuple[list[StatePartitionSummary], int | None, bool]:
    """The state stores' summary, the version whose rows are left to the fanned-out count (None
    when they were counted here), and whether the count fans out to workers (fanout_needed)."""
    commit_ids = facts.commit_ids
    version = commit_ids[-1] + 1 if commit_ids else None
    stores = list_state_store_dirs(facts.listing)
    fan_out = fanout_needed(len(stores))
    state = summarize_state_stores(
        storage,
        stores,
        version=None if fan_out else version,
        committed_version=version,
        conf=state_conf(_latest_conf(facts, checkpoint)),
        commits={**stored_state_commits(checkpoint), **new_commits},
        max_read_bytes=settings.STATE_ROWS_MAX_BYTES,
    )
    return state, version if fan_out else None, fan_out


def settled_findings(facts: CheckpointFacts, checkpoint: Checkpoint, now: datetime) -> list[CheckFinding]:
    """Every finding, but those about the newest batch while it is younger than its stall time
    (the health model's: a batch is overdue when it would be called stalled)."""
    overdue_after = stall_seconds(rhythm_of(checkpoint), Thresholds.from_settings(settings))
    return hold_back_running_batch(run_checks(facts), facts, now=now.timestamp(), overdue_after_seconds=overdue_after)


def findings_to_check_again(checkpoint: Checkpoint, new_commit_ids: Iterable[int]) -> bool:
    """Tell whether newly read commits settle an open finding about the batches without one.

    Such a finding (the newest batch planned but not committed, or several) is checked again by
    the sync that reads the commit, instead of staying until the next full pass.
    """
    newest = max(new_commit_ids, default=None)
    if newest is None:
        return False
    open_paths = checkpoint.findings.open().filter(code__in=RUNNING_BATCH_CODES).values_list("path", flat=True)
    batch_ids = [path.rpartition("/")[2] for path in open_paths]  # offsets/<N>
    return any(batch_id.isdigit() and int(batch_id) <= newest for batch_id in batch_ids)


def _latest_conf(facts: CheckpointFacts, checkpoint: Checkpoint) -> Mapping[str, str]:
    """The conf of the newest offsets file the walk read, else of the newest stored batch."""
    offset_ids = facts.offset_ids
    latest = facts.value_of(f"offsets/{offset_ids[-1]}") if offset_ids else None
    if latest is not None and latest.metadata is not None:
        return latest.metadata.conf
    return checkpoint.batches.latest_conf()


def store_inspection(checkpoint: Checkpoint, inspection: Inspection, now: datetime) -> None:
    """Upsert logs, compact files and findings, add an inventory pass (call in a transaction)."""
    batch_id = inspection.batch_id
    seen = [store_metadata_log(checkpoint, summary, now, batch_id).pk for summary in inspection.metadata_logs]
    checkpoint.metadata_logs.exclude(pk__in=seen).exclude(path__in=inspection.unreadable_logs).delete()
    DirectoryInventory.objects.bulk_create(
        _inventory_row(checkpoint, row, now, batch_id) for row in inspection.inventory
    )
    _store_state(checkpoint, inspection, now)
    _store_findings(checkpoint, inspection.findings, now)
    _mark_inspected(checkpoint, batch_id, now)


def _store_state(checkpoint: Checkpoint, inspection: Inspection, now: datetime) -> None:
    """Replace the state partitions and their totals; start the fanned-out row count if there is one."""
    kept = store_state_partitions(checkpoint, inspection.state, now, with_rows=not inspection.rows_fanned_out)
    delete_state_partitions_except(checkpoint, kept)
    refresh_state_totals(checkpoint)
    if inspection.rows_fanned_out:
        start_state_scan(checkpoint, inspection.state, inspection.fanned_out_rows_version, now)


def _mark_inspected(checkpoint: Checkpoint, batch_id: int | None, now: datetime) -> None:
    checkpoint.last_inspected_at, checkpoint.last_inspected_batch_id, checkpoint.last_probed_at = now, batch_id, now
    checkpoint.save(update_fields=["last_inspected_at", "last_inspected_batch_id", "last_probed_at"])
    # A request made while this walk ran (after the sync started) asks for another one.
    Checkpoint.objects.filter(pk=checkpoint.pk, full_walk_requested_at__lte=now).update(full_walk_requested_at=None)


def _sink_path(facts: CheckpointFacts) -> str:
    sinks = [log.path for log in facts.logs if log.kind == "sink"]
    return sinks[0] if sinks else "_spark_metadata"


def store_metadata_log(
    checkpoint: Checkpoint, summary: MetadataLogSummary, now: datetime, batch_id: int | None
) -> MetadataLog:
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
            "read_at_batch_id": batch_id,
        },
    )
    CompactFile.objects.bulk_create(
        [
            CompactFile(log=log, batch_id=batch_id, size_bytes=size, first_seen_at=now)
            for batch_id, size in summary.compact_file_bytes
        ],
        ignore_conflicts=True,
    )
    return log


def _inventory_row(
    checkpoint: Checkpoint, row: InventoryRow, now: datetime, batch_id: int | None
) -> DirectoryInventory:
    return DirectoryInventory(
        checkpoint=checkpoint,
        taken_at=now,
        taken_at_batch_id=batch_id,
        path=row.path,
        kind=row.kind,
        files=row.files,
        size_bytes=row.bytes,
        small_files=row.small_files,
        oldest_batch_id=row.oldest_batch,
        newest_batch_id=row.newest_batch,
        list_requests=row.list_requests,
        get_requests=row.get_requests,
    )


def _store_findings(checkpoint: Checkpoint, findings: list[CheckFinding], now: datetime) -> None:
    """Upsert one row per (code, path); resolve the open ones this pass did not find again."""
    current = Q(pk__in=[])
    for finding in findings:
        _upsert_finding(checkpoint, finding, now)
        current |= Q(code=finding.code, path=finding.path)
    checkpoint.findings.open().exclude(current).update(resolved_at=now)


def _upsert_finding(checkpoint: Checkpoint, finding: CheckFinding, now: datetime) -> None:
    """The (code, path) row of ``finding``, seen now and open again if it was resolved."""
    figures = {
        "severity": SEVERITY[finding.severity],
        "message": finding.message,
        "restart_impact": finding.restart_impact,
    }
    Finding.objects.update_or_create(
        checkpoint=checkpoint,
        code=finding.code,
        path=finding.path,
        defaults={**figures, "last_seen_at": now, "resolved_at": None},
        create_defaults={**figures, "first_seen_at": now, "last_seen_at": now},
    )
