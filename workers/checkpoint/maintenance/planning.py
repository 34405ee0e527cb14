"""The steps every maintenance planner takes, one function each, so that each is written once.

Every planner (purge, snapshot, cleanup, and compaction's expiry and compaction parts) goes
through the same steps, and only the choice in the middle is its own:

1. list the storage once (``list_batch_logs``; the state actions list ``state/`` as well);
2. check its arguments (its own: each action has other parameters);
3. record the request's parameters and judge "query-stopped" from the offset and commit logs
   (``start_plan``), the first precondition of every plan;
4. stop early, with a plan that carries only that precondition, when there is nothing to choose
   from (``PlanStart.nothing_to_do``);
5. choose what to keep, delete and write (its own);
6. turn each file chosen for deletion into deletes, its sidecars first (``delete_with_sidecars``);
7. judge its other preconditions (its own; ``precondition_unless`` for a list of problems);
8. say what the plan does, or why it does nothing (its own), with its notes;
9. assemble the ``MaintenancePlan`` (``PlanStart.finish``).

Before these functions existed, steps 3, 4, 6 and 9 were written out again in every planner,
which made the planners the longest functions of the library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..fileinfo import FileInfo
from ..layout import COMMITS_DIR, OFFSETS_DIR
from ..storage.checkpointstorage import CheckpointStorage
from .plan import MaintenancePlan, PlannedDelete, PlannedWrite, Precondition, precondition
from .preconditions import query_stopped
from .sidecars import sidecars_of


def list_batch_logs(storage: CheckpointStorage) -> tuple[tuple[FileInfo, ...], tuple[FileInfo, ...]]:
    """Step 1: the listings of ``offsets/`` and ``commits/`` (one LIST each), which every plan judges."""
    return tuple(storage.list_dir(OFFSETS_DIR)), tuple(storage.list_dir(COMMITS_DIR))


@dataclass(frozen=True, slots=True)
class PlanStart:
    """What a planner has settled before its own choice: the action, the parameters, when, and whether
    the query is stopped. ``nothing_to_do`` and ``finish`` turn it into the plan."""

    action: str
    parameters: Mapping[str, Any]
    now: float
    stopped: Precondition

    def nothing_to_do(self, summary: str) -> MaintenancePlan:
        """Step 4: the plan when there is nothing to choose from; it says why in ``summary``."""
        return MaintenancePlan(
            self.action, self.parameters, preconditions=(self.stopped,), summary=summary, planned_at=self.now
        )

    def finish(
        self,
        *,
        summary: str,
        preconditions: Iterable[Precondition] = (),
        writes: Iterable[PlannedWrite] = (),
        deletes: Iterable[PlannedDelete] = (),
        notes: Iterable[str] = (),
    ) -> MaintenancePlan:
        """Step 9: the plan, "query-stopped" first and then the planner's own ``preconditions``."""
        return MaintenancePlan(
            self.action,
            self.parameters,
            writes=tuple(writes),
            deletes=tuple(deletes),
            preconditions=(self.stopped, *preconditions),
            summary=summary,
            planned_at=self.now,
            notes=tuple(notes),
        )


def start_plan(
    action: str,
    parameters: Mapping[str, Any],
    offsets: Iterable[FileInfo],
    commits: Iterable[FileInfo],
    *,
    now: float,
    quiet_seconds: float,
) -> PlanStart:
    """Step 3: the request's ``parameters`` (``quiet_seconds`` appended, as every action takes it)
    and the "query-stopped" precondition judged from the ``offsets`` and ``commits`` listings."""
    return PlanStart(
        action,
        {**parameters, "quiet_seconds": quiet_seconds},
        now,
        query_stopped(offsets, commits, now=now, quiet_seconds=quiet_seconds),
    )


def delete_with_sidecars(
    directory: str, name: str, files: Mapping[str, FileInfo], reason: str, *, sidecar_reason: str
) -> list[PlannedDelete]:
    """Step 6: the deletes of ``name`` in ``directory``, each of its sidecars first (``sidecars_of``'s order).

    ``files`` are the directory's files by name (their sizes go into the plan).
    """
    deletes = [
        PlannedDelete(join(directory, sidecar), files[sidecar].size, sidecar_reason)
        for sidecar in sidecars_of(name, files)
    ]
    deletes.append(PlannedDelete(join(directory, name), files[name].size, reason))
    return deletes


def precondition_unless(name: str, problems: Sequence[str], fine: str, *, prefix: str = "") -> Precondition:
    """Step 7, for a precondition that a list of problems fails: it holds when ``problems`` is empty
    (the detail is then ``fine``), else its detail is ``prefix`` and the problems joined by "; "."""
    if problems:
        return precondition(name, False, prefix + "; ".join(problems))
    return precondition(name, True, fine)


def join(directory: str, name: str) -> str:
    """The path of ``name`` in ``directory`` ("" is the storage's root)."""
    return f"{directory}/{name}" if directory else name
