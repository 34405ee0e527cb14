"""Undo a maintenance run from its backup (``backup.py``): the checkpoint as it was, byte for byte.

The run's ``manifest.json`` names every file it deleted or overwrote (copied to the backup first)
and every file it created. The undo is a plan like any other: it writes each backed-up file back
to its place (an atomic write, overwriting whatever is there) and deletes the files the run
created. Hadoop ``.crc`` files are restored after the files they describe, because writing a file
removes the ``.crc`` beside it. The undo backs itself up below the run's backup (``<run>/undo``),
so that an undo can be undone too.

It is refused when the checkpoint moved on since the run: a file the run deleted is back with
other bytes, or a file it created or overwrote is gone (the query ran again, another run changed
it). Putting old files back then would mix two histories. It is also refused when a backup copy
is missing or has another size than the manifest says (a pruned or damaged backup).
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping, Sequence

from ..errors import CheckpointError
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size, plural
from .backup import BackupManifest, backup_path, check_backup_dir, read_manifest
from .execute import SINK_PATH_PREFIX, AppliedPlan, StepHook, StorageSet, apply_plan
from .plan import FileState, MaintenancePlan, PlannedDelete, PlannedWrite, Precondition
from .planning import PlanStart, list_batch_logs, precondition_unless, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS

ACTION = "undo"


def plan_undo(
    storage: CheckpointStorage,
    *,
    backup_dir: str,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    sink_storage: CheckpointStorage | None = None,
) -> MaintenancePlan:
    """Plan putting back what the run backed up in ``backup_dir`` (relative to the checkpoint)."""
    backup_dir = check_backup_dir(backup_dir)
    offsets, commits = list_batch_logs(storage)
    start = start_plan(ACTION, {"backup_dir": backup_dir}, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    refusal = _refusal(storage, backup_dir, sink_storage)
    if refusal is not None:
        return start.finish(summary=f"cannot undo: {refusal.detail}", preconditions=[refusal])
    manifest = read_manifest(storage, backup_dir)
    return _finish_undo(start, StorageSet(storage, sink_storage), backup_dir, manifest)


def _finish_undo(start: PlanStart, storages: StorageSet, backup_dir: str, manifest: BackupManifest) -> MaintenancePlan:
    """The plan that restores what the ``manifest``'s run deleted or overwrote and deletes what it created."""
    restored = {**manifest.deleted, **manifest.overwritten}
    current = storages.sizes([*restored, *manifest.created])
    writes = [_restore(backup_dir, path, size) for path, size in sorted(restored.items(), key=_crc_files_last)]
    deletes = _delete_created(manifest, current)
    return start.finish(
        summary=_summary(manifest, writes, deletes),
        preconditions=_preconditions(storages, backup_dir, manifest, current),
        writes=writes,
        deletes=deletes,
        notes=[
            f"Undoes the {manifest.action} run backed up in {backup_dir}; what that run's effects "
            "caused outside the checkpoint (rows a restarted query sent elsewhere) is not undone."
        ],
    )


def _refusal(storage: CheckpointStorage, backup_dir: str, sink: CheckpointStorage | None) -> Precondition | None:
    """Why no undo can be planned at all: no readable manifest, or sink files and no sink storage."""
    try:
        manifest = read_manifest(storage, backup_dir)
    except CheckpointError as exc:
        return precondition_unless("backup-complete", [str(exc)], "")
    paths = (*manifest.deleted, *manifest.overwritten, *manifest.created)
    if sink is None and any(path.startswith(SINK_PATH_PREFIX) for path in paths):
        problem = f"the {manifest.action} run changed the file sink's output, but no sink location is known"
        return precondition_unless("sink-location", [problem], "")
    return None


def _preconditions(
    storages: StorageSet, backup_dir: str, manifest: BackupManifest, current: Mapping[str, int | None]
) -> list[Precondition]:
    restored = {**manifest.deleted, **manifest.overwritten}
    return [
        precondition_unless(
            "backup-complete",
            _backup_problems(storages.checkpoint, backup_dir, restored),
            f"every file the {manifest.action} run deleted or overwrote has its copy in {backup_dir}",
        ),
        precondition_unless(
            "unchanged-since-run",
            _changed_since(storages, backup_dir, manifest, current),
            f"the files the {manifest.action} run changed are as it left them",
            prefix="the checkpoint changed after the run: ",
        ),
    ]


def _delete_created(manifest: BackupManifest, current: Mapping[str, int | None]) -> list[PlannedDelete]:
    """The deletes of the files the run created that are still there (``current``: path -> size or None)."""
    return [
        PlannedDelete(path, size, f"created by the {manifest.action} run being undone")
        for path in manifest.created
        if (size := current[path]) is not None
    ]


def _crc_files_last(item: tuple[str, int]) -> tuple[bool, str]:
    """Hadoop ``.<name>.crc`` files after the files they describe (a write removes the old one)."""
    name = posixpath.basename(item[0])
    return (name.startswith(".") and name.endswith(".crc"), item[0])


def _restore(backup_dir: str, path: str, size: int) -> PlannedWrite:
    return PlannedWrite(
        path=path,
        inputs=(FileState(backup_path(backup_dir, path), size),),
        estimated_bytes=size,
        reason=f"restored from {backup_dir}",
        overwrite=True,
    )


def _backup_problems(storage: CheckpointStorage, backup_dir: str, restored: Mapping[str, int]) -> list[str]:
    problems = []
    for path, size in sorted(restored.items()):
        copy = storage.find_info(backup_path(backup_dir, path))
        if copy is None:
            problems.append(f"the copy of {path} is missing")
        elif copy.size != size:
            problems.append(f"the copy of {path} has {copy.size} bytes, the manifest says {size}")
    return problems


def _changed_since(
    storages: StorageSet, backup_dir: str, manifest: BackupManifest, current: Mapping[str, int | None]
) -> list[str]:
    """Files that are not as the run left them (nor as an interrupted undo left them).

    A deleted file that is back is compared with its copy: a query that ran again after a rewind
    rewrites ``offsets/<N+1>`` with other bytes, often of the same size.
    """
    problems = []
    for path, size in manifest.deleted.items():
        if current[path] is not None and not _same_as_copy(storages, backup_dir, path, size, current[path]):
            problems.append(f"{path}, which the run deleted, exists again with other content")
    for path in manifest.overwritten:
        if current[path] is None:
            problems.append(f"{path}, which the run rewrote, is gone")
    return problems


def _same_as_copy(storages: StorageSet, backup_dir: str, path: str, size: int, current_size: int) -> bool:
    if current_size != size:
        return False
    storage, relpath = storages.resolve(path)
    copy = storages.checkpoint.find_bytes(backup_path(backup_dir, path), max_bytes=None)
    return copy is not None and storage.read_bytes(relpath, max_bytes=None) == copy


def _summary(manifest: BackupManifest, writes: Sequence[PlannedWrite], deletes: Sequence[PlannedDelete]) -> str:
    restored = sum(w.estimated_bytes for w in writes)
    return (
        f"undo the {manifest.action} run: restore {plural(len(writes), 'file')} ({format_size(restored)}) "
        f"and delete {plural(len(deletes), 'file')} it created"
    )


def _restored_content(checkpoint: CheckpointStorage, _target: CheckpointStorage, write: PlannedWrite) -> bytes:
    """The bytes of the backup copy (always in the checkpoint, whatever storage the target is on)."""
    return checkpoint.read_bytes(write.inputs[0].path, max_bytes=None)


def apply_undo(
    storage: CheckpointStorage,
    plan: MaintenancePlan,
    *,
    on_step: StepHook | None = None,
    sink_storage: CheckpointStorage | None = None,
) -> AppliedPlan:
    """Carry out a confirmed undo plan: restore, then delete what the run created."""
    build = functools.partial(_restored_content, storage)
    return apply_plan(storage, plan, build, on_step=on_step, sink_storage=sink_storage)
