"""Bring one state store's key set from its version to a newer one by reading only the new versions' files.

Their names are known, so nothing is listed (as probe.py does for the logs). For each version v
after the key set's:

- HDFS: ``<v>.delta`` is read (HDFSBackedStateStore.commit writes one per version) and
  ``<v>.snapshot`` looked up (maintenance may have written it since);
- RocksDB: ``<v>[_<id>].changelog`` is read and ``<v>[_<id>].zip`` looked up, ``<id>`` being the
  version's unique id from the commit log (checkpoint format 2). A version with a zip and no
  changelog (changelog checkpointing off) gives its rows from the zip's numKeys; the key set
  is then unknown until a cold read.

A delta or changelog that is missing raises MissingFileError: the chain has a gap (Spark's
maintenance deleted it, or the store was rewritten), and the caller rebuilds the key set with a
cold read (read_state_keys), which lists the store and loads the version as Spark does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import CheckpointError, MissingFileError
from .rocksdbrows import open_rocksdb_rows
from .rocksdbzip import MAX_ZIP_BYTES, parse_rocksdb_zip
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .stateinventory import StateStoreDir, detect_provider, files_for_version, parse_hdfs_state_files
from .statekeys import StateKeys, follow_changelog, follow_delta, state_keys_of
from .staterows import apply_delta
from .statesummary import StateConf
from .storage.checkpointstorage import CheckpointStorage


@dataclass(frozen=True, slots=True)
class StateFile:
    name: str
    size: int


@dataclass(frozen=True, slots=True)
class FollowedVersion:
    """The files of one new version: its delta or changelog (None: a zip only) and its snapshot or zip."""

    version: int
    change: StateFile | None
    snapshot: StateFile | None


@dataclass(frozen=True, slots=True)
class StoreFollow:
    """Where following left a store: ``keys`` None when the last versions came from zips alone."""

    version: int
    rows: int
    keys: StateKeys | None
    versions: tuple[FollowedVersion, ...]


def follow_store(
    storage: CheckpointStorage,
    store_path: str,
    provider: str,
    keys: StateKeys,
    target: int,
    *,
    conf: StateConf,
    unique_ids: Mapping[int, str],
) -> StoreFollow:
    """Apply the versions after ``keys.version`` up to ``target`` to ``keys``.

    ``unique_ids`` maps version -> unique id (RocksDB format 2). Raises MissingFileError on a gap
    (see the module docstring), CheckpointError naming the file for a damaged or unfollowable one.
    """
    if provider not in ("hdfs", "rocksdb"):
        raise CheckpointError(store_path, f"a {provider!r} store is not followed")
    step = _hdfs_step if provider == "hdfs" else _rocksdb_step
    current: StateKeys | None = keys
    rows, versions = keys.rows, []
    for version in range(keys.version + 1, target + 1):
        current, rows, files = step(storage, store_path, current, version, conf, unique_ids.get(version))
        versions.append(files)
    return StoreFollow(target, rows, current, tuple(versions))


def read_state_keys(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    conf: StateConf,
    unique_id: str | None = None,
    max_read_bytes: int = MAX_STATE_FILE_BYTES,
) -> StateKeys:
    """The key set of ``store`` at ``version``, loaded as Spark loads it (a cold read of its chain).

    Raises MissingFileError when a file the version needs is gone, CheckpointError when it needs
    more than ``max_read_bytes`` of files or cannot be read.
    """
    if version == 0:
        return state_keys_of((), version=0)
    if detect_provider(store.files) == "rocksdb":
        with open_rocksdb_rows(
            storage, store, version, codec=conf.codec, unique_id=unique_id, max_read_bytes=max_read_bytes
        ) as rows:
            return state_keys_of((key for key, _, _ in rows), version=version)
    chain = files_for_version(parse_hdfs_state_files(store.files)[0], version, source=store.path)
    needed = sum(f.size for f in chain)
    if needed > max_read_bytes:
        raise CheckpointError(
            store.path, f"not counted: version {version} needs {needed} bytes of files (limit {max_read_bytes})"
        )
    # Replayed as loadMap does, snapshot first, with staterows' run readers (every record checked).
    live: dict[bytes, int] = {}
    for state_file in chain:
        source = f"{store.path}/{state_file.name}"
        raw = decompress_state_file(
            storage.read_bytes(source, max_bytes=MAX_STATE_FILE_BYTES), source=source, codec=conf.codec
        )
        apply_delta(raw, source, live, row_checksum=conf.row_checksum, keep_removals=False)
    return state_keys_of(live, version=version)


def _hdfs_step(
    storage: CheckpointStorage, store_path: str, keys: StateKeys, version: int, conf: StateConf, unique_id: str | None
) -> tuple[StateKeys, int, FollowedVersion]:
    source = f"{store_path}/{version}.delta"
    data = storage.read_bytes(source, max_bytes=MAX_STATE_FILE_BYTES)
    keys = follow_delta(keys, data, version=version, source=source, codec=conf.codec, row_checksum=conf.row_checksum)
    snapshot = storage.find_info(f"{store_path}/{version}.snapshot")
    files = FollowedVersion(version, StateFile(f"{version}.delta", len(data)), _state_file(snapshot))
    return keys, keys.rows, files


def _rocksdb_step(
    storage: CheckpointStorage,
    store_path: str,
    keys: StateKeys | None,
    version: int,
    conf: StateConf,
    unique_id: str | None,
) -> tuple[StateKeys | None, int, FollowedVersion]:
    stem = f"{version}_{unique_id}" if unique_id else str(version)
    source = f"{store_path}/{stem}.changelog"
    data = storage.find_bytes(source, max_bytes=MAX_STATE_FILE_BYTES)
    if data is None:
        return _zip_only(storage, f"{store_path}/{stem}.zip", version)
    if keys is None:
        raise MissingFileError(
            source, f"the key set before version {version} is unknown (it came from a zip's numKeys)"
        )
    keys = follow_changelog(keys, data, version=version, source=source, codec=conf.codec)
    zip_info = storage.find_info(f"{store_path}/{stem}.zip")
    return keys, keys.rows, FollowedVersion(version, StateFile(f"{stem}.changelog", len(data)), _state_file(zip_info))


def _zip_only(storage: CheckpointStorage, path: str, version: int) -> tuple[None, int, FollowedVersion]:
    """A version without changelog: its rows are the zip's numKeys (MissingFileError if no zip either)."""
    try:
        data = storage.read_bytes(path, max_bytes=MAX_ZIP_BYTES)
    except MissingFileError:
        raise MissingFileError(path, f"version {version} has neither a changelog nor a zip") from None
    metadata = parse_rocksdb_zip(data, source=path)
    if metadata.num_keys < 0 or metadata.column_family_mapping:
        raise MissingFileError(
            path, "numKeys is not tracked (or the store has column families): the rows need a cold read"
        )
    return None, metadata.num_keys, FollowedVersion(version, None, StateFile(path.rsplit("/", 1)[-1], len(data)))


def _state_file(info) -> StateFile | None:
    return None if info is None else StateFile(info.name, info.size)
