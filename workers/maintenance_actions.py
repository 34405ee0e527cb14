"""Maintenance actions on a registered checkpoint: its storages and settings handed to the library.

``workers.checkpoint.maintenance.actions`` knows the actions; this module knows where a
Checkpoint row's files are (its URL, the sink log it registered) and the settings that apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from dashboards.models import Checkpoint
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.maintenance.execute import AppliedPlan, StepHook
from workers.checkpoint.maintenance.plan import MaintenancePlan
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.storage_options import open_storage


def _storages(checkpoint: Checkpoint) -> tuple[CheckpointStorage, CheckpointStorage | None]:
    storage = open_storage(checkpoint.url)
    sink = open_storage(checkpoint.sink_log_url) if checkpoint.sink_log_url else None
    return storage, sink


def plan(checkpoint: Checkpoint, action: str, parameters: Mapping[str, Any], *, now: float) -> MaintenancePlan:
    """Plan ``action`` on ``checkpoint`` from storage as it is now."""
    storage, sink = _storages(checkpoint)
    parameters = _with_known_query_id(checkpoint, action, parameters)
    return _plan(storage, sink, action, parameters, now=now, compact_interval=checkpoint.file_log_compact_interval)


def _with_known_query_id(checkpoint: Checkpoint, action: str, parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    """A repair's parameters with the query id this dashboard knows, unless the request gave one.

    A lost ``metadata`` file can only be rewritten with the query's id; the syncs stored it from
    that file (and progress events name it) before it was lost, so the plan writes it back.
    """
    if action != "repair" or parameters.get("query_id") or checkpoint.query_id is None:
        return parameters
    return {**parameters, "query_id": str(checkpoint.query.query_id)}


def plan_unregistered(url: str, action: str, parameters: Mapping[str, Any], *, now: float) -> MaintenancePlan:
    """Plan ``action`` on a checkpoint no row describes, under the allowed roots (CheckpointError outside them)."""
    return _plan(open_storage(url), None, action, parameters, now=now, compact_interval=None)


def _plan(
    storage: CheckpointStorage,
    sink: CheckpointStorage | None,
    action: str,
    parameters: Mapping[str, Any],
    *,
    now: float,
    compact_interval: int | None,
) -> MaintenancePlan:
    options = {} if compact_interval is None else {"compact_interval": compact_interval}
    return plan_action(
        action,
        storage,
        parameters,
        now=now,
        quiet_seconds=float(settings.MAINTENANCE_QUIET_SECONDS),
        sink_storage=sink,
        **options,
    )


def apply(
    checkpoint: Checkpoint, parameters: Mapping[str, Any], plan: MaintenancePlan, *, on_step: StepHook
) -> AppliedPlan:
    """Apply a confirmed, re-checked plan on the storage it was made for (``parameters``: the request's)."""
    storage, sink = _storages(checkpoint)
    return apply_action(storage, plan, parameters, sink_storage=sink, on_step=on_step)


def apply_unregistered(
    url: str, parameters: Mapping[str, Any], plan: MaintenancePlan, *, on_step: StepHook | None = None
) -> AppliedPlan:
    """Apply a confirmed plan of ``plan_unregistered`` on the same URL."""
    return apply_action(open_storage(url), plan, parameters, on_step=on_step)
