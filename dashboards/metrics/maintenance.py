"""Maintenance families: runs by action and result, and runs holding a checkpoint's maintenance slot.

One aggregate query over MaintenanceRun grouped by checkpoint, action and status. Actions and
statuses are fixed choices, so the labels stay bounded.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Max

from dashboards.metrics.families import CheckpointLabels, add, counter, gauge, seconds
from dashboards.models import MaintenanceAction, MaintenanceRun

Status = MaintenanceRun.Status
# What a finished run came to; the other statuses are steps on the way.
RESULTS = (Status.SUCCEEDED, Status.FAILED, Status.REFUSED, Status.NOTHING_TO_DO, Status.CANCELLED)


def maintenance_families(labels: CheckpointLabels) -> Iterator:
    runs, active, succeeded = _maintenance_metrics()
    counts = _runs_by_status()
    for pk in labels:
        for action in MaintenanceAction.values:
            for result in RESULTS:
                add(runs, labels, pk, counts.get((pk, action, result), {}).get("n", 0), action, result)
            in_slot = sum(counts.get((pk, action, status), {}).get("n", 0) for status in MaintenanceRun.ACTIVE_STATUSES)
            add(active, labels, pk, in_slot, action)
            add(succeeded, labels, pk, seconds(counts.get((pk, action, Status.SUCCEEDED), {}).get("last")), action)
    yield from (runs, active, succeeded)


def _maintenance_metrics() -> tuple:
    """The runs counter and the active and last-success gauges, by action."""
    runs = counter(
        "maintenance_runs",
        "Maintenance runs that ended, by action and result (succeeded, failed, refused, nothing, cancelled).",
        ("action", "result"),
    )
    active = gauge(
        "maintenance_runs_active",
        "Maintenance runs queued or running (at most one per checkpoint), by action.",
        ("action",),
    )
    succeeded = gauge(
        "maintenance_last_success_timestamp_seconds",
        "When the last successful run of the action finished (Unix seconds).",
        ("action",),
    )
    return runs, active, succeeded


def _runs_by_status() -> dict:
    """(checkpoint id, action, status) -> the count of such runs (``n``) and when the last finished (``last``)."""
    rows = (
        MaintenanceRun.objects.order_by()
        .values("checkpoint_id", "action", "status")
        .annotate(n=Count("pk"), last=Max("finished_at"))
    )
    return {(row["checkpoint_id"], row["action"], row["status"]): row for row in rows}
