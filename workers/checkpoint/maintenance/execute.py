"""Applying a maintenance plan through the storage edge, so that a crash at any point is harmless.

Order: every write first, then the deletes in the plan's order. A write goes to a temporary
name and is renamed into place only when complete (``CheckpointStorage.write_atomic``), so a
reader sees the old files or the new one, never half a file; the files it was built from are
deleted only afterwards. Each step is idempotent: a write whose target already exists was done
by an interrupted run and is skipped (unless the plan overwrites), a delete of a missing file is
a no-op. Running the same plan again therefore finishes what a killed run started.

When the request named a ``backup_dir`` (``backup.py``), the run first writes the backup's
manifest and then copies every file right before deleting or overwriting it, so that ``undo``
can put the checkpoint back byte for byte. A plan path ``@sink/<p>`` names file ``<p>`` of the
file sink's output directory (``StorageSet``): a rewind deletes sink log entries and data files.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import CheckpointError, MissingFileError
from ..fileinfo import FileInfo
from ..layout import is_temporary_file
from ..storage.checkpointstorage import CheckpointStorage
from .backup import RunBackup, backup_dir_of, touched_paths
from .plan import MaintenancePlan, PlannedDelete, PlannedWrite
from .sidecars import hadoop_crc_bytes, hadoop_crc_name

# Builds the bytes of one planned write from its inputs; supplied by the action's module.
ContentBuilder = Callable[[CheckpointStorage, PlannedWrite], bytes]
# Called before every change to storage with (operation, path, steps done, steps in all):
# progress reporting, and the hook fault-injection tests use to kill the process mid-plan.
StepHook = Callable[[str, str, int, int], None]


# A plan path with this prefix names a file below the file sink's output directory, not the checkpoint.
SINK_PATH_PREFIX = "@sink/"


class StorageSet:
    """The checkpoint's storage and, when a plan touches it, the file sink's: a plan path to (storage, path)."""

    def __init__(self, checkpoint: CheckpointStorage, sink: CheckpointStorage | None = None) -> None:
        self.checkpoint, self.sink = checkpoint, sink

    def resolve(self, path: str) -> tuple[CheckpointStorage, str]:
        if not path.startswith(SINK_PATH_PREFIX):
            return self.checkpoint, path
        if self.sink is None:
            raise ValueError(f"{path}: the plan changes the file sink's output, but no sink storage was given")
        return self.sink, path[len(SINK_PATH_PREFIX) :]

    def size_of(self, path: str) -> int | None:
        storage, relpath = self.resolve(path)
        info = storage.find_info(relpath)
        return None if info is None or info.is_dir else info.size

    def sizes(self, paths: Iterable[str]) -> dict[str, int | None]:
        """The current size of each plan path (None: absent), one lookup each."""
        return {path: self.size_of(path) for path in paths}


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
    sink_storage: CheckpointStorage | None = None,
) -> AppliedPlan:
    """Carry out ``plan`` (already checked and confirmed) and say what was done.

    ``sink_storage`` is the file sink's output directory, for plans with ``@sink/`` paths.
    """
    storages = StorageSet(storage, sink_storage)
    for path in (*(w.path for w in plan.writes), *(d.path for d in plan.deletes)):
        storages.resolve(path)  # a plan touching the sink without its storage fails before any change
    step = _Steps(len(plan.writes) + len(plan.deletes), on_step)
    backup = _start_backup(storages, plan, step)
    written, skipped = _apply_writes(storages, plan.writes, build_content, step, backup)
    deleted, absent, freed = _apply_deletes(storages, plan.deletes, step, backup)
    step("done", "", final=True)
    return AppliedPlan(tuple(written), tuple(skipped), tuple(deleted), tuple(absent), freed)


def _apply_writes(
    storages: StorageSet,
    writes: Sequence[PlannedWrite],
    build: ContentBuilder,
    step: _Steps,
    backup: RunBackup | None,
) -> tuple[list[str], list[str]]:
    """Do the ``writes`` in order; the paths written, and those skipped (already done)."""
    written, skipped = [], []
    for write in writes:
        if _apply_write(storages, write, build, step, backup):
            written.append(write.path)
        elif not write.checksum_only:  # restrict_to_confirmed already says why it is not written
            skipped.append(write.path)
    return written, skipped


def _apply_deletes(
    storages: StorageSet, deletes: Sequence[PlannedDelete], step: _Steps, backup: RunBackup | None
) -> tuple[list[str], list[str], int]:
    """Do the ``deletes`` in order, each after its backup; the paths deleted, those absent, the bytes freed."""
    deleted, absent, freed = [], [], 0
    for delete in deletes:
        target, relpath = storages.resolve(delete.path)
        if backup is not None:
            step("backup", delete.path)
            backup.copy_before_change(target, relpath, delete.path)
        step("delete", delete.path)
        if target.delete(relpath):
            deleted.append(delete.path)
            freed += delete.size
        else:
            absent.append(delete.path)
    return deleted, absent, freed


def _start_backup(storages: StorageSet, plan: MaintenancePlan, step: _Steps) -> RunBackup | None:
    """The run's backup with its manifest written, or None when the request asked for none."""
    backup_dir = backup_dir_of(plan)
    if backup_dir is None or plan.is_empty:
        return None
    backup = RunBackup(storages.checkpoint, backup_dir)
    step("backup-manifest", backup_dir)
    backup.write_manifest_once(plan, storages.sizes(touched_paths(plan)))
    return backup


class _Steps:
    """Counts steps and calls the hook."""

    def __init__(self, total: int, hook: StepHook | None) -> None:
        self.done, self.total, self.hook = 0, total, hook

    def __call__(self, operation: str, path: str, *, final: bool = False) -> None:
        if self.hook is not None:
            self.hook(operation, path, self.done, self.total)
        if not final and operation in ("write", "delete"):
            self.done += 1


def _apply_write(
    storages: StorageSet, write: PlannedWrite, build: ContentBuilder, step: _Steps, backup: RunBackup | None
) -> bool:
    storage, relpath = storages.resolve(write.path)
    directory, name = posixpath.split(relpath)
    listing = {info.name: info for info in storage.list_dir(directory)}
    _remove_leftover_temporaries(storage, directory, name, listing, step)
    crc = _join(directory, hadoop_crc_name(name))
    if write.checksum_only or (name in listing and not write.overwrite):
        _complete_crc(storage, relpath, crc, listing, write, step)
        step("write", write.path)  # done by an earlier, interrupted run
        return False
    _check_inputs_unchanged(storages, write)
    data = build(storage, write)
    if backup is not None:
        step("backup", write.path)
        backup.copy_before_change(storage, relpath, write.path)
        backup.copy_before_change(storage, crc, _sibling(write.path, crc))
    _write_file_then_crc(storage, write, (relpath, crc), data, hadoop_crc_name(name) in listing, step)
    return True


def _write_file_then_crc(
    storage: CheckpointStorage,
    write: PlannedWrite,
    relpaths: tuple[str, str],
    data: bytes,
    crc_present: bool,
    step: _Steps,
) -> None:
    """Write ``data`` to the file and its CRC (``relpaths``), deleting the CRC there first (``crc_present``)."""
    relpath, crc = relpaths
    # The file goes first and its CRC after, with any CRC already there deleted before: a run
    # killed in between leaves a file without a CRC, which Hadoop reads unchecked. A CRC without its
    # file would make Spark's own later write of that name fail (its rename moves the CRC too and
    # finds one there), and a CRC beside other bytes fails Spark's read.
    if crc_present:
        step("delete-crc", crc)
        storage.delete(crc)
    step("write", write.path)
    storage.write_atomic(relpath, data, overwrite=write.overwrite)
    if write.hadoop_crc:
        step("write-crc", crc)
        storage.write_atomic(crc, hadoop_crc_bytes(data), overwrite=True)


def _complete_crc(
    storage: CheckpointStorage, relpath: str, crc: str, listing: dict[str, FileInfo], write: PlannedWrite, step: _Steps
) -> None:
    """The file is there, written whole (atomically) by an earlier run killed before its CRC: add the CRC."""
    name = posixpath.basename(relpath)
    if write.hadoop_crc and name in listing and posixpath.basename(crc) not in listing:
        step("write-crc", crc)
        storage.write_atomic(crc, hadoop_crc_bytes(storage.read_bytes(relpath, max_bytes=None)), overwrite=True)


def _sibling(plan_path: str, relpath: str) -> str:
    """The plan path of ``relpath``, a file beside the one ``plan_path`` names (same storage)."""
    prefix = SINK_PATH_PREFIX if plan_path.startswith(SINK_PATH_PREFIX) else ""
    return prefix + relpath


def _remove_leftover_temporaries(
    storage: CheckpointStorage, directory: str, name: str, listing: dict[str, FileInfo], step: _Steps
) -> None:
    """Delete temporary files an interrupted write of ``name`` left (``.<name>.<uuid>.tmp``)."""
    for leftover in sorted(listing):
        if is_temporary_file(leftover) and leftover.startswith(f".{name}."):
            step("delete-temporary", _join(directory, leftover))
            storage.delete(_join(directory, leftover))


def _check_inputs_unchanged(storages: StorageSet, write: PlannedWrite) -> None:
    listings: dict[str, dict[str, FileInfo]] = {}
    for state in write.inputs:
        storage, relpath = storages.resolve(state.path)
        directory, name = posixpath.split(relpath)
        key = f"{state.path[: len(state.path) - len(relpath)]}{directory}"
        if key not in listings:
            listings[key] = {info.name: info for info in storage.list_dir(directory)}
        info = listings[key].get(name)
        if info is None:
            raise MissingFileError(state.path, f"needed to build {write.path} but it no longer exists; plan again")
        if info.size != state.size:
            raise PlanOutdatedError(state.path, f"was {state.size} bytes when planned, now {info.size}")


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name
