"""One entry point per maintenance action name, for callers that hold only a name and parameters.

The web side stores a request as ("purge", {"keep_batches": 3}); this module turns that into the
right ``plan_*`` / ``apply_*`` call. A file sink's log lives outside the checkpoint, so compacting
it (``log="sink"``) takes the sink's storage as well.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..metadatalog import DEFAULT_COMPACT_INTERVAL, sink_log_location
from ..storage.checkpointstorage import CheckpointStorage
from . import cleanup, compaction, purge, snapshot
from .clock import storage_now
from .execute import AppliedPlan, StepHook
from .plan import MaintenancePlan

ACTIONS = ("purge", "snapshot", "cleanup", "compact")
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
    judges, read first (``clock.storage_now``), and says so in its notes.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown maintenance action {action!r}; expected one of {', '.join(ACTIONS)}")
    options = {**parameters, "quiet_seconds": quiet_seconds}
    log_storage, log_dir = (
        _log_location(options.pop("log", None), storage, sink_storage) if action == "compact" else (storage, None)
    )
    options["now"], clock_notes = storage_now((storage, log_storage), now)
    if action == "purge":
        plan = purge.plan_purge(storage, **options)
    elif action == "snapshot":
        plan = snapshot.plan_snapshot(storage, **options)
    elif action == "cleanup":
        plan = cleanup.plan_cleanup(storage, **options)
    else:
        plan = compaction.plan_compaction(
            log_storage, log_dir, checkpoint_storage=storage, compact_interval=compact_interval, **options
        )
    return dataclasses.replace(plan, notes=plan.notes + clock_notes)


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
