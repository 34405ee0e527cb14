"""Sync families: the last finished sync of each checkpoint, and totals over every sync ever run.

Three queries: the last finished runs by primary key (found by ``read_checkpoints``), one
aggregate over the SyncRun rows kept, grouped by checkpoint and status, and the SyncTotal rows
that pruned runs were folded into (workers/retention.py). The totals are counters: runs are
folded before they are deleted, so the sum never drops.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from dashboards.metrics.families import CheckpointLabels, add, counter, gauge, seconds
from dashboards.models import SyncRun, SyncTotal

STORAGE_CALL_KINDS = ("list", "info", "read")


def sync_families(rows: list[dict], labels: CheckpointLabels) -> Iterator:
    yield from _last_run_families(rows, labels)
    yield from _total_families(labels)


def _last_run_families(rows: list[dict], labels: CheckpointLabels) -> Iterator:
    families = _last_run_gauges()
    runs = SyncRun.objects.filter(pk__in=[row["last_run_pk"] for row in rows if row["last_run_pk"]])
    for run in runs.values("checkpoint_id", "started_at", "finished_at", "status", "error_count"):
        pk = run["checkpoint_id"]
        add(families["finished"], labels, pk, seconds(run["finished_at"]))
        add(families["duration"], labels, pk, (run["finished_at"] - run["started_at"]).total_seconds())
        add(families["errors"], labels, pk, run["error_count"])
        add(families["failed"], labels, pk, int(run["status"] == SyncRun.Status.FAILED))
    for row in rows:
        add(families["success"], labels, row["pk"], seconds(row["last_synced_at"]))
        add(families["issues"], labels, row["pk"], row["open_issue_count"])
    yield from families.values()


def _last_run_gauges() -> dict:
    """The last sync's families, empty, in the order they are exposed."""
    return {
        "success": gauge(
            "sync_last_success_timestamp_seconds",
            "When the last sync that stored its results (status ok or partial) started (Unix seconds).",
        ),
        "finished": gauge(
            "sync_last_run_timestamp_seconds", "When the last finished sync ended, whatever its status (Unix seconds)."
        ),
        "duration": gauge("sync_last_run_duration_seconds", "Wall-clock duration of the last finished sync."),
        "errors": gauge("sync_last_run_errors", "Files the last finished sync could not read (1 for a failed sync)."),
        "failed": gauge("sync_last_run_failed", "1 if the last finished sync failed as a whole, else 0."),
        "issues": gauge(
            "sync_open_issues", "Files of the checkpoint that the worker cannot read now (open sync issues)."
        ),
    }


def _total_families(labels: CheckpointLabels) -> Iterator:
    runs = counter(
        "sync_runs", "Syncs that finished, by status (ok, partial: ok with file errors, failed).", ("status",)
    )
    calls = counter("sync_storage_calls", "Storage requests made by syncs, by kind (list, info, read).", ("kind",))
    read_bytes = counter("sync_storage_read_bytes", "Bytes syncs read from storage.")
    statuses = [SyncRun.Status.OK, SyncRun.Status.PARTIAL, SyncRun.Status.FAILED]
    totals = _sync_totals()
    # Every checkpoint gets its counters, at 0 before its first sync: increase() needs a first sample.
    for pk in labels:
        total = totals.get(pk, Counter())
        for status in statuses:
            add(runs, labels, pk, total[f"runs_{status}"], str(status))
        for kind in STORAGE_CALL_KINDS:
            add(calls, labels, pk, total[f"{kind}_calls"], kind)
        add(read_bytes, labels, pk, total["bytes_read"])
    yield from (runs, calls, read_bytes)


def _sync_totals() -> dict[int, Counter]:
    """Checkpoint pk -> runs by status ("runs_<status>") and summed storage figures, kept and folded."""
    totals: dict[int, Counter] = defaultdict(Counter)
    # Running syncs count their storage calls so far, not as a run.
    kept = SyncRun.objects.totals_by_checkpoint_and_status()
    folded = SyncTotal.objects.values("checkpoint_id", "status", "runs", *SyncTotal.SUMMED_FIELDS)
    for row in [*kept, *folded]:
        total = totals[row["checkpoint_id"]]
        total[f"runs_{row['status']}"] += row["runs"]
        total.update({field: row[field] or 0 for field in SyncTotal.SUMMED_FIELDS})
    return totals
