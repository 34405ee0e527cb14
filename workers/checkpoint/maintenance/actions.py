"""One entry point per maintenance action name, for callers that hold only a name and parameters.

The web side stores a request as ("purge", {"keep_batches": 3}); this module turns that into the
right ``plan_*`` / ``apply_*`` call. A file sink's log lives outside the checkpoint, so compacting
it (``log="sink"``) takes the sink's storage as well, and so does a rewind (it rewinds the
sink's log and deletes the data files only rewound entries list) and the undo of such a rewind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..metadatalog import DEFAULT_COMPACT_INTERVAL, sink_log_location
from ..storage.checkpointstorage import CheckpointStorage
from . import cleanup, compaction, purge, repair, rewind, skip, snapshot, undo
from .clock import storage_now
from .execute import AppliedPlan, StepHook
from .plan import MaintenancePlan, each_once

ACTIONS = ("purge", "snapshot", "cleanup", "compact", "repair", "skip", "rewind", "undo")
# Actions that may change the file sink's output directory as well as the checkpoint.
SINK_ACTIONS = ("rewind", "undo")
# How a request names the file sink's log; file source logs are named "sources/<i>".
SINK_LOG = "sink"


def plan_action(
    action: str,
    storage: CheckpointStorage,
    parameters: Mapping[str, Any],
    *,
    now: float,
    quiet_seconds: float,
    sink_storage: CheckpointStorage | None = None,
    compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> MaintenancePlan:
    """Plan ``action`` with the request's ``parameters`` on the checkpoint in ``storage``.

    ``now`` is this worker's clock; the plan measures ages on the clock of the storages it
    judges, read first (``clock.storage_now``), and says so in its "storage-clock" precondition.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown maintenance action {action!r}; expected one of {', '.join(ACTIONS)}")
    options = {**parameters, "quiet_seconds": quiet_seconds}
    log_storage, log_dir = (
        _log_location(options.pop("log", None), storage, sink_storage) if action == "compact" else (storage, None)
    )
    clocked = (storage, log_storage) if sink_storage is None or action not in SINK_ACTIONS else (storage, sink_storage)
    options["now"], clock_readings = storage_now(clocked, now)
    if action in SINK_ACTIONS:
        options["sink_storage"] = sink_storage
    where = _Where(storage, sink_storage, log_storage, log_dir, compact_interval)
    plan = _PLANNERS[action](where, options)
    return dataclasses.replace(plan, preconditions=each_once(plan.preconditions + clock_readings))


@dataclasses.dataclass(frozen=True, slots=True)
class _Where:
    """The storages a plan may need beside its options: the checkpoint's, the sink's, the compacted log's."""

    storage: CheckpointStorage
    sink_storage: CheckpointStorage | None
    log_storage: CheckpointStorage
    log_dir: str | None
    compact_interval: int


def _plan_skip(where: _Where, options: dict[str, Any]) -> MaintenancePlan:
    return skip.plan_skip(
        where.storage, sink_storage=where.sink_storage, compact_interval=where.compact_interval, **options
    )


def _plan_compaction(where: _Where, options: dict[str, Any]) -> MaintenancePlan:
    return compaction.plan_compaction(
        where.log_storage,
        where.log_dir,
        checkpoint_storage=where.storage,
        compact_interval=where.compact_interval,
        **options,
    )


def _on_checkpoint(planner: Callable[..., MaintenancePlan]) -> Callable[[_Where, dict[str, Any]], MaintenancePlan]:
    """A planner that needs only the checkpoint's storage and the request's options."""
    return lambda where, options: planner(where.storage, **options)


# The planner of each action, by name (every name of ACTIONS).
_PLANNERS: dict[str, Callable[[_Where, dict[str, Any]], MaintenancePlan]] = {
    "purge": _on_checkpoint(purge.plan_purge),
    "snapshot": _on_checkpoint(snapshot.plan_snapshot),
    "cleanup": _on_checkpoint(cleanup.plan_cleanup),
    "compact": _plan_compaction,
    "repair": _on_checkpoint(repair.plan_repair),
    "skip": _plan_skip,
    "rewind": _on_checkpoint(rewind.plan_rewind),
    "undo": _on_checkpoint(undo.plan_undo),
}


def apply_action(
    storage: CheckpointStorage,
    plan: MaintenancePlan,
    parameters: Mapping[str, Any],
    *,
    sink_storage: CheckpointStorage | None = None,
    on_step: StepHook | None = None,
) -> AppliedPlan:
    """Apply a confirmed plan of ``plan.action`` (``parameters`` are the request's, as planned)."""
    if plan.action == "purge":
        return purge.apply_purge(storage, plan, on_step=on_step)
    if plan.action == "snapshot":
        return snapshot.apply_snapshot(storage, plan, on_step=on_step)
    if plan.action == "cleanup":
        return cleanup.apply_cleanup(storage, plan, on_step=on_step)
    if plan.action == "repair":
        return repair.apply_repair(storage, plan, on_step=on_step)
    if plan.action == "skip":
        return skip.apply_skip(storage, plan, sink_storage=sink_storage, on_step=on_step)
    if plan.action == "rewind":
        return rewind.apply_rewind(storage, plan, on_step=on_step, sink_storage=sink_storage)
    if plan.action == "undo":
        return undo.apply_undo(storage, plan, on_step=on_step, sink_storage=sink_storage)
    if plan.action == "compact":
        log_storage, _ = _log_location(parameters.get("log"), storage, sink_storage)
        return compaction.apply_compaction(log_storage, plan, on_step=on_step)
    raise ValueError(f"unknown maintenance action {plan.action!r}; expected one of {', '.join(ACTIONS)}")


def _log_location(
    log: str | None, storage: CheckpointStorage, sink_storage: CheckpointStorage | None
) -> tuple[CheckpointStorage, str]:
    """The storage and directory of the compactible log a request names."""
    if log == SINK_LOG:
        if sink_storage is None:
            raise ValueError("the file sink's log was asked for, but no sink log location is known")
        # The sink location may be the query's output directory or its _spark_metadata.
        log_dir, _ = sink_log_location(sink_storage)
        return sink_storage, log_dir
    if not log or not log.startswith("sources/"):
        raise ValueError(f"a compactible log is 'sink' or 'sources/<i>', not {log!r}")
    return storage, log
