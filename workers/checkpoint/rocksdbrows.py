"""Rows of a RocksDB state store at a version, exact: the zip's SST files plus the changelogs after it.

Version V loads as a zip s (or the empty version 0) and the changelogs s+1..V
(rocksdbloadchain.resolve_load_chain). A zip alone gives only its ``numKeys``; on top of it, whether
a put adds a key or overwrites one is known from the zip's key set, which lives in its SST files.
So, as RocksDB.load does:

1. the changelogs, oldest first, fill ``changes``: key -> (value, changelog name), the value
   None for a deleted key. Memory holds the keys touched since the zip, never the zip's keys;
2. the zip's instance is rebuilt from its SSTs (rocksdbinstance.py, a temporary local copy);
3. rows = numKeys + keys present in ``changes`` - keys of ``changes`` the zip already holds
   (multi-gets). Spark keeps numKeys exact on every put and delete while
   ``trackTotalNumberOfRows`` is on (the default); with it off the zip says -1 and the zip's
   keys are iterated instead, those in ``changes`` left out.

The rows themselves (for samples) are the zip's in key order, each replaced or dropped by
``changes``, then the keys the changelogs added, in the order they were first put.

Column families (transformWithState, join state format 3+ on 4.x) are refused here: each family
has its own schema and its own rows, and internal families (timers, TTL) are not user rows.
rocksdbcfrows.py reads such stores, family by family, on the same load plan (plan_rocksdb_load).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import countOf

from .errors import CheckpointError, CorruptFileError, MissingFileError
from .rocksdbfiles import RocksDBVersionFile
from .rocksdbinstance import RocksDBInstance, open_rocksdb_instance
from .rocksdbstate import RocksDBVersionState, read_changelog, read_rocksdb_version, read_rocksdb_zip
from .rocksdbzip import RocksDBCheckpointMetadata
from .stateinventory import StateStoreDir
from .storage.checkpointstorage import CheckpointStorage
from .wording import plural

# RocksDBStateEncoder's STATE_ENCODING_VERSION: the byte before every key's and value's UnsafeRow.
STATE_ENCODING_VERSION = 0

Changes = dict[bytes, tuple[bytes | None, str]]


@dataclass(frozen=True, slots=True)
class RocksDBRowCount:
    """The rows of a version and how they were found (for the page's note)."""

    version: int
    rows: int
    how: str


def read_rocksdb_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
) -> RocksDBRowCount:
    """Count the rows of ``store`` at ``version`` as Spark's ``statestore`` source reads them.

    ``unique_id`` (checkpoint format 2) comes from the commit log. Raises MissingFileError when
    a file the version needs is gone, CheckpointError when it has column families or needs more
    than ``max_read_bytes`` of files, CorruptFileError (naming the file) for a damaged zip, SST
    or changelog.
    """
    load = plan_rocksdb_load(storage, store, version, codec=codec, unique_id=unique_id, max_read_bytes=max_read_bytes)
    changes = _replay(storage, store.path, load.changelogs, codec)
    live = sum(1 for value, _ in changes.values() if value is not None)
    replayed = plural(len(load.changelogs), "changelog")
    if load.snapshot is None:
        return RocksDBRowCount(version, live, f"replay of {replayed} from version 0")
    rows, how = _rows_with_snapshot(storage, store.path, load, changes, live)
    return RocksDBRowCount(version, rows, f"{how} + {replayed}" if load.changelogs else how)


def _rows_with_snapshot(
    storage: CheckpointStorage, path: str, load: RocksDBLoad, changes: Changes, live: int
) -> tuple[int, str]:
    """The zip's keys the changelogs left alone (``changes``), plus the ``live`` ones they put; and how counted."""
    with open_rocksdb_instance(storage, path, load.snapshot.name, load.metadata) as instance:
        num_keys = load.metadata.num_keys
        if num_keys >= 0:
            rows = num_keys - countOf(instance.find_present(list(changes)), True) + live
            how = f"numKeys of {load.snapshot.name} ({num_keys})"
        else:
            rows = countOf(map(changes.__contains__, instance.iter_keys()), False) + live
            how = f"the keys of {load.snapshot.name} (numKeys -1: row tracking was off)"
    return rows, how


@contextlib.contextmanager
def open_rocksdb_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
) -> Iterator[Iterator[tuple[bytes, bytes, str]]]:
    """Yield an iterator over the rows at ``version``: (key, value, path of the file it came from).

    Keys and values are as stored: the encoding version byte, then the UnsafeRow (see
    strip_encoding_version). Raises as read_rocksdb_rows.
    """
    load = plan_rocksdb_load(storage, store, version, codec=codec, unique_id=unique_id, max_read_bytes=max_read_bytes)
    changes = _replay(storage, store.path, load.changelogs, codec)
    if load.snapshot is None:
        yield _changed_rows(changes)
        return
    with open_rocksdb_instance(storage, store.path, load.snapshot.name, load.metadata) as instance:
        yield _merged_rows(instance, changes)


def strip_encoding_version(data: bytes, *, source: str, what: str) -> bytes:
    """Return the UnsafeRow of a stored key or value, after checking its encoding version byte."""
    if not data:
        raise CorruptFileError(source, f"an empty {what}")
    if data[0] != STATE_ENCODING_VERSION:
        raise CorruptFileError(source, f"a {what} has encoding version {data[0]}, not {STATE_ENCODING_VERSION}")
    return data[1:]


@dataclass(frozen=True, slots=True)
class RocksDBLoad:
    """The files that load a version: its zip (None: version 0) with its metadata, and changelogs."""

    snapshot: RocksDBVersionFile | None
    metadata: RocksDBCheckpointMetadata | None
    changelogs: tuple[RocksDBVersionFile, ...]


def plan_rocksdb_load(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    unique_id: str | None,
    max_read_bytes: int | None,
    column_families: bool = False,
) -> RocksDBLoad:
    """The zip and changelogs that load ``version``, after checking they exist and fit the limit.

    A zip with column families is refused unless ``column_families`` (the caller reads them).
    """
    state = _read_loadable_version(storage, store, version, codec=codec, unique_id=unique_id)
    snapshot = state.chain.snapshot
    metadata = None if snapshot is None else read_rocksdb_zip(storage, f"{store.path}/{snapshot.name}")
    if state.missing_immutable_files:
        raise _immutable_file_error(storage, store.path, snapshot, metadata, state.missing_immutable_files[0])
    if metadata is not None and metadata.column_family_mapping and not column_families:
        raise _column_families(f"{store.path}/{snapshot.name}")
    load = RocksDBLoad(snapshot, metadata, state.chain.changelogs)
    _check_read_limit(load, store.path, version, max_read_bytes)
    return load


def _read_loadable_version(
    storage: CheckpointStorage, store: StateStoreDir, version: int, *, codec: str | None, unique_id: str | None
) -> RocksDBVersionState:
    """The state of ``version`` of the store; MissingFileError when its chain of files does not load."""
    state = read_rocksdb_version(storage, store, version, codec=codec, unique_id=unique_id)
    if not state.chain.is_loadable:
        raise MissingFileError(store.path, f"version {version} cannot be loaded: " + "; ".join(state.chain.problems))
    return state


def _check_read_limit(load: RocksDBLoad, path: str, version: int, max_read_bytes: int | None) -> None:
    """Refuse a load whose zip, SST files and changelogs add up to more than ``max_read_bytes``."""
    needed = sum(f.size for f in load.changelogs)
    if load.metadata is not None:
        needed += load.snapshot.size + sum(f.size_bytes for f in load.metadata.sst_files)
    if max_read_bytes is not None and needed > max_read_bytes:
        raise CheckpointError(
            path, f"not counted: version {version} needs {needed} bytes of files (limit {max_read_bytes})"
        )


def _immutable_file_error(
    storage: CheckpointStorage,
    store_path: str,
    snapshot: RocksDBVersionFile,
    metadata: RocksDBCheckpointMetadata,
    relpath: str,
) -> CheckpointError:
    """The error of an SST or log file the zip lists that is absent or of another size."""
    path = f"{store_path}/{relpath}"
    info = storage.find_info(path)
    if info is None:
        return MissingFileError(path, f"no such file, and {snapshot.name} lists it")
    listed = next(
        (f.size_bytes for f in metadata.sst_files + metadata.log_files if relpath.endswith(f"/{f.dfs_file_name}")), None
    )
    return CorruptFileError(
        path, f"{info.size} bytes, but {snapshot.name} lists {listed}", offset=min(info.size, listed or 0)
    )


def _replay(
    storage: CheckpointStorage, store_path: str, changelogs: Sequence[RocksDBVersionFile], codec: str | None
) -> Changes:
    """Apply the changelogs in order: the last change of each key wins.

    Read without row checksums: a RocksDB store keeps a row's checksum inside its value
    (KeyValueChecksumEncoder), and the key of a record is the key RocksDB holds.
    """
    changes: Changes = {}
    for changelog_file in changelogs:
        source = f"{store_path}/{changelog_file.name}"
        changelog = read_changelog(storage, source, codec=codec)
        if changelog.has_column_families:
            raise _column_families(source)
        changes.update((record.key, (record.value, source)) for record in changelog.records)
    return changes


def _column_families(source: str) -> CheckpointError:
    return CheckpointError(
        source, "the store has column families (transformWithState): ckptweb does not count or decode their rows"
    )


def _merged_rows(instance: RocksDBInstance, changes: Changes) -> Iterator[tuple[bytes, bytes, str]]:
    """The zip's rows in key order as the changelogs left them, then the keys they added."""
    for key, value in instance.iter_items():
        change = changes.pop(key, None)
        if change is None:
            yield key, value, instance.zip_path
        elif change[0] is not None:
            yield key, change[0], change[1]
    yield from _changed_rows(changes)


def _changed_rows(changes: Changes) -> Iterator[tuple[bytes, bytes, str]]:
    for key, (value, source) in changes.items():
        if value is not None:
            yield key, value, source
