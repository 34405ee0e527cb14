"""State figures that follow the batches: a sync that stores newly committed batches brings each
state partition to the version they committed, reading only the new versions' files.

The full walk (workers.inspection) lists and reads every partition, every
CKPTWEB_FULL_WALK_INTERVAL_SECONDS; between two walks the state panel would show an old version.
Here (Apache Hudi RFC-03's idea, applied to state), each partition's key set at the version
its rows are of is kept on the worker's disk, ``STATE_KEYS_DIR/<checkpoint>/<op>/<store>/<partition>.keys``
(``<checkpoint>``: its id and a digest of its URL)
(statekeys.py; 16 bytes a row), and the new versions' delta or changelog files are applied to
it (statefollow.follow_store). A key-set file that is missing, unreadable or stale, or a gap in
the version chain, is rebuilt by a cold read of the target version. Key-set files are written
whole to a temporary name, then renamed, so a crash leaves the old one or the new one.

A store with column families (transformWithState, join state formats 3 and 4) keeps a
statefamilykeys.FamilyKeys instead (its keys with their family, bytes and list elements; 34
bytes a row), which moves every state variable's figures too; a version with a zip is read cold
(statefollow._family_step). Where that key set would pass CKPTWEB_STATE_ROWS_MAX_BYTES, the
store is read cold at each followed version instead, and its note says so.

What the new files tell moves too: latest version, the snapshot (or zip) and the deltas (or
changelogs) after it, the restart load and the bytes on disk, by adding the new files. Files
Spark's maintenance deleted and snapshots written after the sync looked are the probe's to see,
between walks (workers.probe_pass). On an object store this runs at most once per CKPTWEB_STATE_FOLLOW_MIN_SECONDS
per checkpoint; a checkpoint without state costs no storage call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import xxhash
from django.conf import settings
from django.db.models import Max

from dashboards.models import Checkpoint, StatePartition
from workers.checkpoint.errors import CheckpointError, MissingFileError
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.statefamilykeys import FAMILY_KEY_BYTES, FamilyKeys, parse_key_set
from workers.checkpoint.statefollow import (
    FollowedVersion,
    StoreFollow,
    family_follow,
    follow_store,
    read_state_keys,
)
from workers.checkpoint.stateinventory import DEFAULT_STORE_NAME, StateStoreDir, list_partition_stores
from workers.checkpoint.statekeys import HEADER_BYTES, StateKeys, parse_state_keys_header
from workers.checkpoint.statesummary import StateConf, state_conf, summarize_state_stores
from workers.checkpoint.statevariables import StateVariableFigures, describe_store_variables
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.intervals import interval_passed
from workers.state_partitions import (
    FILE_FIGURES,
    ROW_FIGURES,
    VERSION_FIGURES,
    partition_figure,
    refresh_state_totals,
    stored_state_commits,
)

logger = logging.getLogger(__name__)

FOLLOWED_PROVIDERS = ("hdfs", "rocksdb")
# A partition this many versions behind is read cold instead: what one sync reads stays bounded.
MAX_FOLLOWED_VERSIONS = 1_000
FOLLOWED_FIELDS = (*VERSION_FIGURES, *ROW_FIGURES, "updated_at")


def read_state_follow(
    checkpoint: Checkpoint, storage: CheckpointStorage, new_commits: Mapping[int, Any], now: datetime
) -> list[StatePartition]:
    """Bring the partitions to the version the newest of ``new_commits`` committed; return the
    changed StatePartition rows, not saved yet (store_state_follow saves them). Key-set files are
    written here. Returns [] when no new batch was committed or it is not due."""
    target = _target_version(checkpoint, new_commits)
    if target is None or not _follow_due(checkpoint, storage, now):
        return []
    rows = list(checkpoint.state_partitions.filter(provider__in=FOLLOWED_PROVIDERS).exclude(rows_version=target))
    if not rows:
        return []
    # Key sets are loaded one partition at a time; their headers say which commits are needed.
    kept_versions = [find_state_keys_version(keys_path(checkpoint, row)) for row in rows]
    lowest = min((v for v in kept_versions if v is not None and v < target), default=target - 1)
    commits = {**stored_state_commits(checkpoint, range(lowest, target)), **new_commits}
    conf = state_conf(checkpoint.batches.latest_conf())
    for row in rows:
        if row.variables and _is_too_large(_kept_rows(row)):
            keys_path(checkpoint, row).unlink(missing_ok=True)
            _recount_variables(storage, row, target, conf, commits)
            row.note = row.note or _too_large_note(_kept_rows(row), target)
        else:
            keys = _usable_keys(row, load_state_keys(keys_path(checkpoint, row)), target)
            _follow_partition(checkpoint, storage, row, keys, target, conf, commits)
        row.updated_at = now
    return rows


def store_state_follow(checkpoint: Checkpoint, rows: list[StatePartition]) -> None:
    """Save what read_state_follow found (call in the sync's transaction)."""
    if rows:
        StatePartition.objects.bulk_update(rows, FOLLOWED_FIELDS, batch_size=500)
        refresh_state_totals(checkpoint)


def forget_state_keys_except(checkpoint_ids: Iterable[int]) -> int:
    """Delete from this worker's disk the key sets of checkpoints not in ``checkpoint_ids`` (deleted
    ones); return how many checkpoints' folders went. A folder made meanwhile costs a cold read."""
    root = Path(settings.STATE_KEYS_DIR)
    if not root.is_dir():
        return 0
    kept = {str(checkpoint_id) for checkpoint_id in checkpoint_ids}
    gone = [folder for folder in root.iterdir() if folder.is_dir() and folder.name.partition("-")[0] not in kept]
    for folder in gone:
        shutil.rmtree(folder, ignore_errors=True)
    return len(gone)


def keys_path(checkpoint: Checkpoint, row: StatePartition) -> Path:
    return keys_folder(checkpoint) / str(row.operator) / row.store / f"{row.partition}.keys"


def keys_folder(checkpoint: Checkpoint) -> Path:
    """``<pk>-<digest of the URL>``: a database rebuilt under the same worker, whose ids start
    again, does not find another checkpoint's key sets under its own."""
    return Path(settings.STATE_KEYS_DIR) / f"{checkpoint.pk}-{xxhash.xxh3_64_hexdigest(checkpoint.url.encode())}"


def load_state_keys(path: Path) -> StateKeys | FamilyKeys | None:
    """The key set kept at ``path``; None when there is none or it cannot be read (it is rebuilt)."""
    try:
        data = path.read_bytes()
    except OSError:  # none kept yet, or unreadable: rebuilt either way
        return None
    try:
        return parse_key_set(data, source=str(path))
    except CheckpointError as exc:
        logger.warning("state key set rebuilt from storage: %s", exc)
        return None


def find_state_keys_version(path: Path) -> int | None:
    """The version of the key set kept at ``path``, from its header; None when there is none to use."""
    try:
        with path.open("rb") as handle:
            return parse_state_keys_header(handle.read(HEADER_BYTES), source=str(path))[0]
    except (OSError, CheckpointError):
        return None


def save_state_keys(path: Path, keys: StateKeys | FamilyKeys) -> None:
    """Write the key set to a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(keys.to_bytes())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _target_version(checkpoint: Checkpoint, new_commits: Mapping[int, Any]) -> int | None:
    """The version the newest commit committed (batch N commits version N + 1), if newer than known."""
    newest = max(new_commits, default=None)
    known = checkpoint.latest_committed_batch_id
    if newest is None or (known is not None and newest <= known):
        return None
    return newest + 1


def _follow_due(checkpoint: Checkpoint, storage: CheckpointStorage, now: datetime) -> bool:
    if storage.is_local:
        return True
    last = checkpoint.state_partitions.aggregate(last=Max("updated_at"))["last"]
    return interval_passed(last, now, settings.STATE_FOLLOW_MIN_SECONDS)


def _usable_keys(
    row: StatePartition, keys: StateKeys | FamilyKeys | None, target: int
) -> StateKeys | FamilyKeys | None:
    """The kept key set, unless it is stale: ahead of the target (a checkpoint rewound or replaced),
    too far behind, of a version whose rows the full pass counted differently, or of the other
    kind (the store has column families or not)."""
    if keys is None or keys.version > target or target - keys.version > MAX_FOLLOWED_VERSIONS:
        return None
    if isinstance(keys, FamilyKeys) != bool(row.variables):
        return None
    kept_rows = _kept_rows(row)
    if row.rows_version == keys.version and kept_rows is not None and kept_rows != keys.rows:
        return None
    return keys


def _kept_rows(row: StatePartition) -> int | None:
    """The keys a key set of the row's version holds: its rows, or all its families' rows."""
    if row.variables:
        return sum(variable["rows"] for variable in row.variables)
    return row.rows


def _is_too_large(rows: int | None) -> bool:
    """Whether a FamilyKeys of ``rows`` keys would pass CKPTWEB_STATE_ROWS_MAX_BYTES."""
    return rows is not None and rows * FAMILY_KEY_BYTES > settings.STATE_ROWS_MAX_BYTES


def _too_large_note(rows: int | None, target: int) -> str:
    return (
        f"read cold at version {target}: a key set of its {rows} keys ({FAMILY_KEY_BYTES} bytes each) "
        f"would pass CKPTWEB_STATE_ROWS_MAX_BYTES ({settings.STATE_ROWS_MAX_BYTES})"
    )


def _follow_partition(
    checkpoint: Checkpoint,
    storage: CheckpointStorage,
    row: StatePartition,
    keys: StateKeys | FamilyKeys | None,
    target: int,
    conf: StateConf,
    commits: Mapping[int, Any],
) -> None:
    """Follow one partition to ``target`` (cold when it must), updating ``row`` and its key-set file."""
    path = keys_path(checkpoint, row)
    try:
        try:
            if keys is None:
                raise MissingFileError(str(path), "no key set kept")
            followed = follow_store(
                storage,
                row.path,
                row.provider,
                keys,
                target,
                conf=conf,
                unique_ids=state_unique_ids(row, commits),
                variables=_described_variables(row),
            )
        except MissingFileError:
            followed = _read_cold(storage, row, target, conf, commits)
    except CheckpointError as exc:
        row.note = f"not followed to version {target}: {exc}"
        return
    _advance(row, followed)
    is_too_large = isinstance(followed.keys, FamilyKeys) and _is_too_large(followed.keys.rows)
    if is_too_large:
        row.note = _too_large_note(followed.keys.rows, target)
    try:
        if followed.keys is None or is_too_large:
            path.unlink(missing_ok=True)
        else:
            save_state_keys(path, followed.keys)
    except OSError as exc:  # a full or read-only disk costs the next sync a cold read, not this sync
        logger.warning("state key set %s not kept: %s", path, exc)


def _read_cold(
    storage: CheckpointStorage, row: StatePartition, target: int, conf: StateConf, commits: Mapping[int, Any]
) -> StoreFollow:
    """Rebuild the key set at ``target`` from the store's listing and load chain; the listing
    gives the file figures, as the full pass finds them (``row`` takes them)."""
    store = state_store_dir(storage, row)
    unique_id = state_unique_ids(row, commits).get(target)
    limit = settings.STATE_ROWS_MAX_BYTES
    # A store has column families when schema v3 files describe it (also when the full pass could
    # not count its variables, and left ``row.variables`` empty).
    variables = describe_store_variables(storage, row.operator, row.store) if row.provider == "rocksdb" else ()
    keys = read_state_keys(
        storage,
        store,
        target,
        conf=conf,
        unique_id=unique_id,
        max_read_bytes=limit,
        column_families=bool(variables),
    )
    if isinstance(keys, FamilyKeys):
        followed = family_follow(keys, variables, (), source=row.path)
    else:
        followed = StoreFollow(target, keys.rows, keys, ())
    (summary,) = summarize_state_stores(
        storage, [store], version=None, committed_version=target, conf=conf, commits=commits
    )
    for name in FILE_FIGURES:
        setattr(row, name, getattr(summary, name))
    return followed


def _recount_variables(
    storage: CheckpointStorage, row: StatePartition, target: int, conf: StateConf, commits: Mapping[int, Any]
) -> None:
    """A store with column families whose key set would be too large: its figures are read again
    at ``target`` from its load chain, as the full pass reads them."""
    try:
        store = state_store_dir(storage, row)
        (summary,) = summarize_state_stores(
            storage, [store], version=target, conf=conf, commits=commits, max_read_bytes=settings.STATE_ROWS_MAX_BYTES
        )
    except CheckpointError as exc:
        row.note = f"not followed to version {target}: {exc}"
        return
    for name in (*FILE_FIGURES, *ROW_FIGURES):
        setattr(row, name, partition_figure(summary, name))


def state_store_dir(storage: CheckpointStorage, row: StatePartition) -> StateStoreDir:
    store = next((s for s in list_partition_stores(storage, row.operator, row.partition) if s.store == row.store), None)
    if store is None:
        raise MissingFileError(row.path, "the store directory is gone")
    return store


def state_unique_ids(row: StatePartition, commits: Mapping[int, Any]) -> dict[int, str]:
    """Version -> unique id (RocksDB format 2): the commit log's are certain for the default store only."""
    if row.store != DEFAULT_STORE_NAME:
        return {}
    return state_unique_ids_by_version(commits, operator=row.operator, partition=row.partition)


def _advance(row: StatePartition, followed: StoreFollow) -> None:
    """Move the row's figures to what the followed versions' files say (files of versions the row
    already counted are not counted twice)."""
    known = row.latest_version if row.latest_version is not None else -1
    new = [version for version in followed.versions if version.version > known]
    # Files of versions the full pass found uncommitted are on disk already, counted in its bytes.
    on_disk = set(row.uncommitted_versions)
    row.bytes_on_disk += sum(
        f.size for version in new if version.version not in on_disk for f in (version.change, version.snapshot) if f
    )
    _advance_load_chain(row, new)
    row.latest_version = max(known, followed.version)
    row.uncommitted_versions = [version for version in row.uncommitted_versions if version > followed.version]
    row.rows, row.rows_version, row.note = followed.rows, followed.version, ""
    if isinstance(followed.keys, FamilyKeys):
        row.variables = [asdict(figures) for figures in followed.variables]


def _described_variables(row: StatePartition) -> tuple[StateVariableFigures, ...]:
    """The row's state variables as the last cold read described them (kinds, schemas, history)."""
    return tuple(
        StateVariableFigures(**{**figures, "schema_batches": tuple(figures.get("schema_batches", ()))})
        for figures in row.variables
    )


def _advance_load_chain(row: StatePartition, new: Sequence[FollowedVersion]) -> None:
    """Move the row's load chain (snapshot, deltas, files and bytes a load reads) past the ``new``
    versions: from the newest snapshot among them, else the row's chain grows by their change files."""
    snapshots = [index for index, version in enumerate(new) if version.snapshot is not None]
    if snapshots:
        base = new[snapshots[-1]]
        changes = [version.change for version in new[snapshots[-1] + 1 :] if version.change is not None]
        row.snapshot_version, row.delta_chain = base.version, len(changes)
        row.load_files, row.load_bytes = 1 + len(changes), base.snapshot.size + sum(f.size for f in changes)
    elif new:
        changes = [version.change for version in new if version.change is not None]
        row.delta_chain = None if row.delta_chain is None else row.delta_chain + len(changes)
        row.load_files = None if row.load_files is None else row.load_files + len(changes)
        row.load_bytes = None if row.load_bytes is None else row.load_bytes + sum(f.size for f in changes)
