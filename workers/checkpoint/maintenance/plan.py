"""What a maintenance plan is: the exact files to write and delete, and the preconditions.

Every maintenance action (purge, snapshot, cleanup, compact/expire) is planned by a pure
``plan_*`` function that returns a ``MaintenancePlan`` and applied later by ``apply_plan``
(``execute.py``). The plan is what an on-call engineer reads before confirming, so it names every
file, says why it goes, and carries the preconditions with their state. It round-trips through
JSON (``as_json`` / ``plan_from_json``) so that the web side can store it and a worker can apply
exactly what was confirmed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

# Precondition names that an audited override may waive. Only "the query seems to be running"
# can be: every other failed precondition means the plan would break the checkpoint.
OVERRIDABLE_PRECONDITIONS = frozenset({"query-stopped"})


@dataclass(frozen=True, slots=True)
class Precondition:
    """One condition the plan needs, with whether it holds and the evidence for it."""

    name: str
    ok: bool
    detail: str

    @property
    def overridable(self) -> bool:
        return self.name in OVERRIDABLE_PRECONDITIONS


@dataclass(frozen=True, slots=True)
class FileState:
    """A file a planned write is built from, as it was when planning (path and size)."""

    path: str
    size: int


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A file the plan creates from ``inputs``; ``overwrite`` when it may replace an existing one.

    ``hadoop_crc`` asks for a Hadoop ``.<name>.crc`` next to it (local filesystems, where Spark's
    own writes have one). ``checksum_only``: an interrupted run already wrote the file (a fresh plan
    no longer has it); only its CRC, if the kill came before it, is still to write.
    """

    path: str
    inputs: tuple[FileState, ...]
    estimated_bytes: int
    reason: str
    overwrite: bool = False
    hadoop_crc: bool = False
    checksum_only: bool = False


@dataclass(frozen=True, slots=True)
class PlannedDelete:
    """A file the plan deletes, with its size when planning and why it may go."""

    path: str
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class MaintenancePlan:
    """A complete, ordered plan: writes first, then deletes in the order given.

    ``parameters`` are the inputs of the ``plan_*`` call (thresholds, chosen stores) so that a
    worker can plan again just before applying and compare (``changes_since``).
    """

    action: str
    parameters: Mapping[str, Any]
    writes: tuple[PlannedWrite, ...] = ()
    deletes: tuple[PlannedDelete, ...] = ()
    preconditions: tuple[Precondition, ...] = ()
    summary: str = ""
    planned_at: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def bytes_freed(self) -> int:
        return sum(delete.size for delete in self.deletes)

    @property
    def bytes_written(self) -> int:
        return sum(write.estimated_bytes for write in self.writes)

    @property
    def is_empty(self) -> bool:
        return not self.writes and not self.deletes

    def failed_preconditions(self, *, overrides: Collection[str] = ()) -> tuple[Precondition, ...]:
        """The preconditions that fail and are not waived by ``overrides`` (overridable names only)."""
        waived = set(overrides) & OVERRIDABLE_PRECONDITIONS
        return tuple(p for p in self.preconditions if not p.ok and p.name not in waived)

    def is_allowed(self, *, overrides: Collection[str] = ()) -> bool:
        return not self.failed_preconditions(overrides=overrides)

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "parameters": dict(self.parameters),
            "writes": [_write_json(w) for w in self.writes],
            "deletes": [{"path": d.path, "size": d.size, "reason": d.reason} for d in self.deletes],
            "preconditions": [{"name": p.name, "ok": p.ok, "detail": p.detail} for p in self.preconditions],
            "summary": self.summary,
            "planned_at": self.planned_at,
            "notes": list(self.notes),
            "bytes_freed": self.bytes_freed,
            "bytes_written": self.bytes_written,
        }


def _write_json(write: PlannedWrite) -> dict[str, Any]:
    return {
        "path": write.path,
        "inputs": [{"path": i.path, "size": i.size} for i in write.inputs],
        "estimated_bytes": write.estimated_bytes,
        "reason": write.reason,
        "overwrite": write.overwrite,
        "hadoop_crc": write.hadoop_crc,
    }


def plan_from_json(data: Mapping[str, Any]) -> MaintenancePlan:
    """Rebuild a plan stored with ``as_json`` (derived totals are recomputed, not trusted)."""
    return MaintenancePlan(
        action=data["action"],
        parameters=dict(data.get("parameters", {})),
        writes=tuple(_write_from_json(w) for w in data.get("writes", ())),
        deletes=tuple(PlannedDelete(d["path"], int(d["size"]), d.get("reason", "")) for d in data.get("deletes", ())),
        preconditions=tuple(
            Precondition(p["name"], bool(p["ok"]), p.get("detail", "")) for p in data.get("preconditions", ())
        ),
        summary=data.get("summary", ""),
        planned_at=float(data.get("planned_at", 0.0)),
        notes=tuple(data.get("notes", ())),
    )


def _write_from_json(data: Mapping[str, Any]) -> PlannedWrite:
    return PlannedWrite(
        path=data["path"],
        inputs=tuple(FileState(i["path"], int(i["size"])) for i in data.get("inputs", ())),
        estimated_bytes=int(data.get("estimated_bytes", 0)),
        reason=data.get("reason", ""),
        overwrite=bool(data.get("overwrite", False)),
        hadoop_crc=bool(data.get("hadoop_crc", False)),
    )


def restrict_to_confirmed(
    confirmed: MaintenancePlan, fresh: MaintenancePlan
) -> tuple[MaintenancePlan, tuple[str, ...]]:
    """The part of ``confirmed`` that a ``fresh`` plan of the same request still wants.

    A worker plans again right before applying, from the checkpoint as it is now. It then does
    only what both plans contain: nothing the user did not confirm, and nothing the current state
    no longer allows (the query ran on, Spark's own maintenance ran, an interrupted run already
    did part of it). The preconditions are the fresh ones. The second value names each skipped
    file and why, for the run's result.
    """
    skipped: list[str] = []
    writes = _writes_still_planned(confirmed, fresh, skipped)
    deletes = _deletes_still_planned(confirmed, fresh, skipped)
    plan = MaintenancePlan(
        action=confirmed.action,
        parameters=confirmed.parameters,
        writes=tuple(writes),
        deletes=tuple(deletes),
        preconditions=fresh.preconditions,
        summary=confirmed.summary,
        planned_at=fresh.planned_at,
        notes=fresh.notes,
    )
    return plan, tuple(skipped)


def _writes_still_planned(confirmed: MaintenancePlan, fresh: MaintenancePlan, skipped: list[str]) -> list[PlannedWrite]:
    """The confirmed writes the fresh plan has with the same inputs; of the others, the CRC only of those
    that keep one. Each write not done in full is named in ``skipped``."""
    fresh_writes = {w.path: w for w in fresh.writes}
    writes = []
    for write in confirmed.writes:
        again = fresh_writes.get(write.path)
        if again is not None and again.inputs == write.inputs:
            writes.append(write)
        else:
            if write.hadoop_crc:
                writes.append(replace(write, checksum_only=True))
            skipped.append(
                f"write {write.path}: no longer planned with the same inputs (already written, or the files changed)"
            )
    return writes


def _deletes_still_planned(
    confirmed: MaintenancePlan, fresh: MaintenancePlan, skipped: list[str]
) -> list[PlannedDelete]:
    """The confirmed deletes the fresh plan has too; each other one is named in ``skipped``."""
    fresh_deletes = {d.path for d in fresh.deletes}
    deletes = []
    for delete in confirmed.deletes:
        if delete.path in fresh_deletes:
            deletes.append(delete)
        else:
            skipped.append(f"delete {delete.path}: no longer planned (already deleted, or now needed)")
    return deletes


def precondition(name: str, ok: bool, detail: str) -> Precondition:
    """Shorthand used by the planners."""
    return Precondition(name, bool(ok), detail)


def each_once(preconditions: Iterable[Precondition]) -> tuple[Precondition, ...]:
    """``preconditions`` with each name once, in the order names first appear.

    A condition judged in several ways ("query-stopped": by the files' dates, by the progress
    received, by the syncs) is one condition: it holds when every judgement holds, and its detail
    gives the judgements that fail first, then the others, joined by "; ".
    """
    by_name: dict[str, list[Precondition]] = {}
    for judged in preconditions:
        by_name.setdefault(judged.name, []).append(judged)
    return tuple(_joined(name, judgements) for name, judgements in by_name.items())


def _joined(name: str, judgements: list[Precondition]) -> Precondition:
    if len(judgements) == 1:
        return judgements[0]
    ordered = [p for p in judgements if not p.ok] + [p for p in judgements if p.ok]
    return Precondition(name, all(p.ok for p in judgements), "; ".join(p.detail for p in ordered))


def batch_span(first: int, last: int) -> str:
    """Name the batches ``first`` to ``last`` for a plan's text: "batch 7", "batches 0–77 (78 batches)"."""
    if first == last:
        return f"batch {first}"
    return f"batches {first}–{last} ({last - first + 1} batches)"


def batch_ids_text(batch_ids: Sequence[int]) -> str:
    """Name sorted batch ids for a plan's text: ``batch_span`` of their range, saying so when some are missing."""
    first, last = batch_ids[0], batch_ids[-1]
    if len(batch_ids) == last - first + 1:
        return batch_span(first, last)
    return f"batches {first}–{last} ({len(batch_ids)} batches, with gaps)"
