"""Bring one state store's key set from its version to a newer one by reading only the new versions' files.

Their names are known, so nothing is listed (as probe.py does for the logs). For each version v
after the key set's:

- HDFS: ``<v>.delta`` is read (HDFSBackedStateStore.commit writes one per version) and
  ``<v>.snapshot`` looked up (maintenance may have written it since);
- RocksDB: ``<v>[_<id>].changelog`` is read and ``<v>[_<id>].zip`` looked up, ``<id>`` being the
  version's unique id from the commit log (checkpoint format 2). A version with a zip and no
  changelog (changelog checkpointing off) gives its rows from the zip's numKeys; the key set
  is then unknown until a cold read.
- RocksDB with column families (transformWithState, join state formats 3 and 4): the same, with
  a statefamilykeys.FamilyKeys, which gives each state variable's figures too; a version with
  a zip is read cold instead (_family_step says why), so the figures reset from each snapshot.

A delta or changelog that is missing raises MissingFileError: the chain has a gap (Spark's
maintenance deleted it, or the store was rewritten), and the caller rebuilds the key set with a
cold read (read_state_keys), which lists the store and loads the version as Spark does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import CheckpointError, MissingFileError
from .rocksdbcfrows import open_column_family_rows
from .rocksdbrows import open_rocksdb_rows
from .rocksdbzip import MAX_ZIP_BYTES, parse_rocksdb_zip
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .statefamilykeys import FamilyKeys, family_keys_of, follow_family_changelog
from .stateinventory import StateStoreDir, detect_provider, files_for_version, parse_hdfs_state_files
from .statekeys import StateKeys, follow_changelog, follow_delta, state_keys_of
from .staterows import apply_delta
from .statesummary import StateConf
from .statevariables import StateVariableFigures, figures_with_families, list_family_names, user_rows
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
    """Where following left a store: ``keys`` None when the last versions came from zips alone;
    ``variables`` the figures of each state variable of a store with column families."""

    version: int
    rows: int
    keys: StateKeys | FamilyKeys | None
    versions: tuple[FollowedVersion, ...]
    variables: tuple[StateVariableFigures, ...] = ()


def follow_store(
    storage: CheckpointStorage,
    store_path: str,
    provider: str,
    keys: StateKeys | FamilyKeys,
    target: int,
    *,
    conf: StateConf,
    unique_ids: Mapping[int, str],
    variables: Sequence[StateVariableFigures] = (),
) -> StoreFollow:
    """Apply the versions after ``keys.version`` up to ``target`` to ``keys``.

    ``unique_ids`` maps version -> unique id (RocksDB format 2); ``variables`` describes the
    state variables of a store with column families (FamilyKeys: the figures are theirs). Raises
    MissingFileError on a gap (see the module docstring) or where a version needs a cold read,
    CheckpointError naming the file for a damaged or unfollowable one.
    """
    if provider not in ("hdfs", "rocksdb"):
        raise CheckpointError(store_path, f"a {provider!r} store is not followed")
    step = _hdfs_step if provider == "hdfs" else _rocksdb_step
    current: StateKeys | FamilyKeys | None = keys
    rows, versions = keys.rows, []
    for version in range(keys.version + 1, target + 1):
        current, rows, files = step(storage, store_path, current, version, conf, unique_ids.get(version))
        versions.append(files)
    if isinstance(current, FamilyKeys):
        return family_follow(current, variables, tuple(versions), source=store_path)
    return StoreFollow(target, rows, current, tuple(versions))


def family_follow(
    keys: FamilyKeys, variables: Sequence[StateVariableFigures], versions: tuple[FollowedVersion, ...], *, source: str
) -> StoreFollow:
    """The figures of each of ``variables`` (and of the families they do not name) in ``keys``.

    With ``read_state_keys(column_families=True)`` and statevariables.describe_store_variables,
    a cold read of the version (the figures count_state_variables gives).
    """
    families = keys.family_figures(list_family_names(variables), source=source)
    figures = figures_with_families(variables, families)
    return StoreFollow(keys.version, user_rows(figures), keys, versions, figures)


def read_state_keys(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    conf: StateConf,
    unique_id: str | None = None,
    max_read_bytes: int = MAX_STATE_FILE_BYTES,
    column_families: bool = False,
) -> StateKeys | FamilyKeys:
    """The key set of ``store`` at ``version``, loaded as Spark loads it (a cold read of its chain);
    a FamilyKeys for a RocksDB store with ``column_families``.

    Raises MissingFileError when a file the version needs is gone, CheckpointError when it needs
    more than ``max_read_bytes`` of files or cannot be read.
    """
    if column_families:
        with open_column_family_rows(
            storage, store, version, codec=conf.codec, unique_id=unique_id, max_read_bytes=max_read_bytes
        ) as families:
            return family_keys_of(families)
    if version == 0:
        return state_keys_of((), version=0)
    if detect_provider(store.files) == "rocksdb":
        with open_rocksdb_rows(
            storage, store, version, codec=conf.codec, unique_id=unique_id, max_read_bytes=max_read_bytes
        ) as rows:
            return state_keys_of((key for key, _, _ in rows), version=version)
    return _read_hdfs_keys(storage, store, version, conf, max_read_bytes)


def _read_hdfs_keys(
    storage: CheckpointStorage, store: StateStoreDir, version: int, conf: StateConf, max_read_bytes: int
) -> StateKeys:
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
    snapshot = storage.find_file(f"{store_path}/{version}.snapshot")
    files = FollowedVersion(version, StateFile(f"{version}.delta", len(data)), _state_file(snapshot))
    return keys, keys.rows, files


def _rocksdb_step(
    storage: CheckpointStorage,
    store_path: str,
    keys: StateKeys | FamilyKeys | None,
    version: int,
    conf: StateConf,
    unique_id: str | None,
) -> tuple[StateKeys | FamilyKeys | None, int, FollowedVersion]:
    stem = f"{version}_{unique_id}" if unique_id else str(version)
    if isinstance(keys, FamilyKeys):
        return _family_step(storage, store_path, keys, version, stem, conf)
    source = f"{store_path}/{stem}.changelog"
    data = storage.find_bytes(source, max_bytes=MAX_STATE_FILE_BYTES)
    if data is None:
        return _zip_only(storage, f"{store_path}/{stem}.zip", version)
    if keys is None:
        raise MissingFileError(
            source, f"the key set before version {version} is unknown (it came from a zip's numKeys)"
        )
    keys = follow_changelog(keys, data, version=version, source=source, codec=conf.codec)
    zip_info = storage.find_file(f"{store_path}/{stem}.zip")
    return keys, keys.rows, FollowedVersion(version, StateFile(f"{stem}.changelog", len(data)), _state_file(zip_info))


def _family_step(
    storage: CheckpointStorage, store_path: str, keys: FamilyKeys, version: int, stem: str, conf: StateConf
) -> tuple[FamilyKeys, int, FollowedVersion]:
    """A version of a store with column families: its changelog applied, unless it has a zip.

    Spark's merge operator (spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion) decides
    how a list's appends are joined in the zip's SSTs, which replaying changelogs cannot know: a
    zip resets the figures from itself (MissingFileError: the caller reads the version cold).
    """
    zip_path = f"{store_path}/{stem}.zip"
    if storage.find_file(zip_path) is not None:
        raise MissingFileError(zip_path, f"version {version} has a zip: the figures are read again from it")
    source = f"{store_path}/{stem}.changelog"
    data = storage.read_bytes(source, max_bytes=MAX_STATE_FILE_BYTES)
    keys = follow_family_changelog(keys, data, version=version, source=source, codec=conf.codec)
    return keys, keys.rows, FollowedVersion(version, StateFile(f"{stem}.changelog", len(data)), None)


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
