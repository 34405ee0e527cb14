"""Applying a maintenance plan through the storage edge, so that a crash at any point is harmless.

Order: every write first, then the deletes in the plan's order. A write goes to a temporary
name and is renamed into place only when complete (``CheckpointStorage.write_atomic``), so a
reader sees the old files or the new one, never half a file; the files it was built from are
deleted only afterwards. Each step is idempotent: a write whose target already exists was done
by an interrupted run and is skipped (unless the plan overwrites), a delete of a missing file is
a no-op. Running the same plan again therefore finishes what a killed run started.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import CheckpointError, MissingFileError
from ..fileinfo import FileInfo
from ..layout import is_temporary_file
from ..storage.checkpointstorage import CheckpointStorage
from .plan import MaintenancePlan, PlannedWrite
from .sidecars import hadoop_crc_bytes, hadoop_crc_name

# Builds the bytes of one planned write from its inputs; supplied by the action's module.
ContentBuilder = Callable[[CheckpointStorage, PlannedWrite], bytes]
# Called before every change to storage with (operation, path, steps done, steps in all):
# progress reporting, and the hook fault-injection tests use to kill the process mid-plan.
StepHook = Callable[[str, str, int, int], None]


class PlanOutdatedError(CheckpointError):
    """A file the plan builds from changed or vanished since planning."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, f"{reason}; plan again")


@dataclass(frozen=True, slots=True)
class AppliedPlan:
    """What applying did: files written, files deleted, files already gone, bytes freed."""

    written: tuple[str, ...]
    skipped_writes: tuple[str, ...]
    deleted: tuple[str, ...]
    already_absent: tuple[str, ...]
    bytes_freed: int


def apply_plan(
    storage: CheckpointStorage,
    plan: MaintenancePlan,
    build_content: ContentBuilder,
    *,
    on_step: StepHook | None = None,
) -> AppliedPlan:
    """Carry out ``plan`` (already checked and confirmed) and say what was done."""
    step = _Steps(len(plan.writes) + len(plan.deletes), on_step)
    written, skipped = [], []
    for write in plan.writes:
        if _apply_write(storage, write, build_content, step):
            written.append(write.path)
        else:
            skipped.append(write.path)
    deleted, absent, freed = [], [], 0
    sizes = {d.path: d.size for d in plan.deletes}
    for delete in plan.deletes:
        step("delete", delete.path)
        if storage.delete(delete.path):
            deleted.append(delete.path)
            freed += sizes[delete.path]
        else:
            absent.append(delete.path)
    step("done", "", final=True)
    return AppliedPlan(tuple(written), tuple(skipped), tuple(deleted), tuple(absent), freed)


class _Steps:
    """Counts steps and calls the hook."""

    def __init__(self, total: int, hook: StepHook | None) -> None:
        self.done, self.total, self.hook = 0, total, hook

    def __call__(self, operation: str, path: str, *, final: bool = False) -> None:
        if self.hook is not None:
            self.hook(operation, path, self.done, self.total)
        if not final and operation in ("write", "delete"):
            self.done += 1


def _apply_write(storage: CheckpointStorage, write: PlannedWrite, build: ContentBuilder, step: _Steps) -> bool:
    directory, name = posixpath.split(write.path)
    listing = {info.name: info for info in storage.list_dir(directory)}
    _remove_leftover_temporaries(storage, directory, name, listing, step)
    if name in listing and not write.overwrite:
        step("write", write.path)  # done by an earlier, interrupted run
        return False
    _check_inputs_unchanged(storage, write)
    data = build(storage, write)
    crc = _join(directory, hadoop_crc_name(name))
    if write.hadoop_crc:
        # The CRC goes first: a run killed between the two writes leaves a CRC without its file,
        # which no reader looks at and the next run rewrites; the other order would leave a file
        # whose CRC no later run writes, because the file is then already in place.
        step("write-crc", crc)
        storage.write_atomic(crc, hadoop_crc_bytes(data), overwrite=True)
    elif hadoop_crc_name(name) in listing:
        step("delete-crc", crc)  # it describes the bytes about to be replaced
        storage.delete(crc)
    step("write", write.path)
    storage.write_atomic(write.path, data, overwrite=write.overwrite)
    return True


def _remove_leftover_temporaries(
    storage: CheckpointStorage, directory: str, name: str, listing: dict[str, FileInfo], step: _Steps
) -> None:
    """Delete temporary files an interrupted write of ``name`` left (``.<name>.<uuid>.tmp``)."""
    for leftover in sorted(listing):
        if is_temporary_file(leftover) and leftover.startswith(f".{name}."):
            step("delete-temporary", _join(directory, leftover))
            storage.delete(_join(directory, leftover))


def _check_inputs_unchanged(storage: CheckpointStorage, write: PlannedWrite) -> None:
    listings: dict[str, dict[str, FileInfo]] = {}
    for state in write.inputs:
        directory, name = posixpath.split(state.path)
        if directory not in listings:
            listings[directory] = {info.name: info for info in storage.list_dir(directory)}
        info = listings[directory].get(name)
        if info is None:
            raise MissingFileError(state.path, f"needed to build {write.path} but it no longer exists; plan again")
        if info.size != state.size:
            raise PlanOutdatedError(state.path, f"was {state.size} bytes when planned, now {info.size}")


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name
