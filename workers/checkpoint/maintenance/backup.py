"""The backup a maintenance run leaves so that it can be undone: a manifest, then a copy of each file
right before it is deleted or overwritten.

Layout, inside the checkpoint root (Spark never reads a directory it does not know)::

    _ckptweb_backup/<run>/manifest.json    what the run deletes, overwrites and creates
    _ckptweb_backup/<run>/<path>           the bytes of <path> as they were before the run

A plan path may name a file outside the checkpoint, in the file sink's output directory
(``@sink/<path below the sink's root>``, see ``execute.StorageSet``); its copy still goes inside
the checkpoint, under ``<run>/@sink/...``.

The manifest is written first, before any change, and never rewritten: a resumed run keeps the
manifest of the run it resumes, which names everything the first attempt was going to change.
A copy is made with an atomic write, so an existing copy is a complete one, and a file whose
copy exists is not copied again (idempotent on resume). The order "copy, then delete" means a
kill at any point loses nothing: a deleted file always has its copy.
"""

from __future__ import annotations

import datetime
import json
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import CorruptFileError
from ..layout import BACKUP_DIR
from ..storage.checkpointstorage import CheckpointStorage
from .plan import MaintenancePlan
from .sidecars import hadoop_crc_name

BACKUP_ROOT = BACKUP_DIR
MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
# An undo keeps its own backup beside the manifest it restores from, so an undo can be undone too.
UNDO_SUBDIR = "undo"


def default_backup_dir(now: float) -> str:
    """``_ckptweb_backup/<UTC timestamp>``: where a run backs up when the request names no place."""
    stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{BACKUP_ROOT}/{stamp}"


def check_backup_dir(backup_dir: str) -> str:
    """A backup directory is a relative path below ``_ckptweb_backup``; return it without a trailing '/'."""
    cleaned = backup_dir.strip("/")
    segments = cleaned.split("/")
    if segments[0] != BACKUP_ROOT or len(segments) < 2 or any(s in ("", ".", "..") for s in segments):
        raise ValueError(f"a backup directory is {BACKUP_ROOT}/<name> inside the checkpoint, not {backup_dir!r}")
    return cleaned


def backup_dir_of(plan: MaintenancePlan) -> str | None:
    """Where ``plan``'s run backs up, or None when its request asked for no backup.

    An undo's ``backup_dir`` names the run it undoes; the undo backs itself up below it.
    """
    backup_dir = plan.parameters.get("backup_dir")
    if not backup_dir:
        return None
    return f"{backup_dir}/{UNDO_SUBDIR}" if plan.action == "undo" else str(backup_dir)


@dataclass(frozen=True, slots=True)
class BackupManifest:
    """What a run changes: files it deletes or overwrites (path -> size before) and files it creates."""

    action: str
    deleted: Mapping[str, int]
    overwritten: Mapping[str, int]
    created: tuple[str, ...]

    def as_bytes(self) -> bytes:
        document = {
            "version": MANIFEST_VERSION,
            "action": self.action,
            "deleted": [{"path": p, "size": s} for p, s in self.deleted.items()],
            "overwritten": [{"path": p, "size": s} for p, s in self.overwritten.items()],
            "created": list(self.created),
        }
        return json.dumps(document, indent=1).encode()


def parse_manifest(data: bytes, *, source: str) -> BackupManifest:
    """Read a ``manifest.json``; CorruptFileError naming ``source`` when it is not one."""
    try:
        document = json.loads(data)
        if document.get("version") != MANIFEST_VERSION:
            raise ValueError(f"unknown manifest version {document.get('version')!r}")
        return BackupManifest(
            action=str(document["action"]),
            deleted={str(e["path"]): int(e["size"]) for e in document["deleted"]},
            overwritten={str(e["path"]): int(e["size"]) for e in document["overwritten"]},
            created=tuple(str(p) for p in document["created"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptFileError(source, f"not a backup manifest: {exc}") from exc


def read_manifest(storage: CheckpointStorage, backup_dir: str) -> BackupManifest:
    """The manifest of the run backed up in ``backup_dir`` (MissingFileError when there is none)."""
    path = f"{backup_dir}/{MANIFEST_NAME}"
    return parse_manifest(storage.read_bytes(path), source=path)


def backup_path(backup_dir: str, path: str) -> str:
    """Where the copy of plan path ``path`` lives."""
    return f"{backup_dir}/{path}"


class RunBackup:
    """The backup of one run: writes the manifest once, then copies files before they change.

    ``storage`` is the checkpoint (the backup lives there); ``sizes`` reports the current size of
    a plan path, or None when it does not exist (``execute.StorageSet.size_of``).
    """

    def __init__(self, storage: CheckpointStorage, backup_dir: str) -> None:
        self.storage, self.backup_dir = storage, backup_dir
        self.changed: frozenset[str] = frozenset()

    def write_manifest_once(self, plan: MaintenancePlan, current_sizes: Mapping[str, int | None]) -> None:
        """Write the manifest unless an earlier attempt of this run already did; keep what it says is changed."""
        path = f"{self.backup_dir}/{MANIFEST_NAME}"
        manifest = manifest_of(plan, current_sizes)
        if self.storage.exists(path):
            manifest = read_manifest(self.storage, self.backup_dir)  # a resumed run: the first attempt's
        else:
            self.storage.write_atomic(path, manifest.as_bytes())
        self.changed = frozenset((*manifest.deleted, *manifest.overwritten))

    def copy_before_change(self, source: CheckpointStorage, relpath: str, path: str) -> None:
        """Copy ``relpath`` of ``source`` (plan path ``path``) unless it is gone or already copied.

        An existing copy is complete (written atomically) and is never replaced: after an
        overwrite, a resumed run would otherwise copy the new bytes over the old ones. Only what
        the manifest says the run deletes or overwrites is copied: a file the manifest says it
        creates, found by a resumed run, is the first attempt's own write.
        """
        if path not in self.changed:
            return
        target = backup_path(self.backup_dir, path)
        if self.storage.find_info(target) is not None:
            return
        original = source.find_info(relpath)
        if original is None or original.is_dir:
            return  # deleted by an earlier attempt, after its copy was made
        self.storage.write_atomic(target, source.read_bytes(relpath, max_bytes=None))


def manifest_of(plan: MaintenancePlan, current_sizes: Mapping[str, int | None]) -> BackupManifest:
    """The manifest of ``plan`` given the current size of each path it touches (None: absent)."""
    deleted = {d.path: current_sizes[d.path] for d in plan.deletes if current_sizes.get(d.path) is not None}
    overwritten: dict[str, int] = {}
    created: list[str] = []
    for write in plan.writes:
        crc = _crc_path(write.path)
        for path, may_create in ((write.path, True), (crc, write.hadoop_crc)):
            size = current_sizes.get(path)
            if size is not None and path not in deleted:
                overwritten[path] = size
            elif size is None and may_create:
                created.append(path)
    return BackupManifest(plan.action, deleted, overwritten, tuple(created))


def _crc_path(path: str) -> str:
    directory, name = posixpath.split(path)
    return posixpath.join(directory, hadoop_crc_name(name))


def touched_paths(plan: MaintenancePlan) -> Iterable[str]:
    """Every path whose current size the manifest needs."""
    written = [p for write in plan.writes for p in (write.path, _crc_path(write.path))]
    return [*written, *(d.path for d in plan.deletes)]


def delete_backup(storage: CheckpointStorage, backup_dir: str) -> tuple[int, int]:
    """Delete every file under a run's backup directory; return (files, bytes) deleted.

    Only below ``_ckptweb_backup/<name>`` (``check_backup_dir``), so nothing Spark reads can go.
    Deleting what is already gone is harmless, so a prune killed half-way is finished by the next.
    """
    files = total = 0
    pending = [check_backup_dir(backup_dir)]
    while pending:
        directory = pending.pop()
        for info in storage.list_dir(directory):
            path = f"{directory}/{info.name}"
            if info.is_dir:
                pending.append(path)
            elif storage.delete(path):
                files, total = files + 1, total + info.size
    return files, total
