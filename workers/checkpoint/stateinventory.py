"""What a checkpoint's ``state/`` tree holds, listed through CheckpointStorage.

Layout (StateStoreId.storeCheckpointLocation)::

    state/<operator id>/<partition id>/               the store named "default"
    state/<operator id>/<partition id>/<store name>/  any other store, e.g. the four stores of a
                                                      stream-stream join (left-keyToNumValues, ...)

Besides the numbered directories, ``state/<op>/`` holds ``_metadata/`` (operator metadata, 4.0+)
and ``_stateSchema/`` (schema v3, transformWithState), and a partition or store directory holds
``_metadata/schema`` (in partition 0). The HDFS provider writes ``N.delta`` and ``N.snapshot``
files; RocksDB writes ``N.zip``, ``N.changelog`` (``N_<uuid>.*`` with checkpoint format 2) and
the ``SSTs/`` and ``logs/`` directories.

For the HDFS provider, the file rules are those of HDFSBackedStateStoreProvider.fetchFiles and
filesForVersion (Spark 3.x to 4.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import MissingFileError
from .layout import is_temporary_file, parse_batch_id
from .storage.checkpointstorage import CheckpointStorage

STATE_DIR = "state"
DEFAULT_STORE_NAME = "default"
# Sub-directories of a store directory that belong to the store itself, not to another store.
ROCKSDB_DIRS = frozenset({"SSTs", "logs"})
_SCHEMA_DIR = "_metadata"
_ROCKSDB_SUFFIXES = (".zip", ".changelog")
_HDFS_KINDS = {"delta": "delta", "snapshot": "snapshot"}


@dataclass(frozen=True, slots=True)
class StateFileInfo:
    """One entry of a store directory; ``is_dir`` marks RocksDB's ``SSTs/`` and ``logs/``."""

    name: str
    size: int
    is_dir: bool = False


@dataclass(frozen=True, slots=True)
class StateStoreDir:
    """The directory of one state store instance: operator, partition and store name."""

    operator: int
    partition: int
    store: str
    path: str
    files: tuple[StateFileInfo, ...]


@dataclass(frozen=True, slots=True)
class HdfsStateFile:
    """A ``<version>.delta`` or ``<version>.snapshot`` file (Spark's StoreFile)."""

    version: int
    kind: str  # "delta" | "snapshot"
    name: str
    size: int

    @property
    def is_snapshot(self) -> bool:
        return self.kind == "snapshot"


@dataclass(frozen=True, slots=True)
class HdfsStoreSummary:
    """Where an HDFS-backed store stands: its newest version and how far back a load must go."""

    latest_version: int | None
    last_snapshot_version: int | None
    deltas_since_snapshot: int
    bytes_on_disk: int
    # Versions past the committed one: written by a batch that has no commit (yet), which a
    # restart runs again and rewrites. Not counted in the figures above.
    uncommitted_versions: tuple[int, ...] = ()


def list_state_store_dirs(storage: CheckpointStorage) -> list[StateStoreDir]:
    """List every state store directory below ``state/``, by operator, partition and store.

    One LIST per directory: ``state/``, each operator, each partition, each named store.
    A checkpoint without ``state/`` gives [].
    """
    stores = []
    for operator in _numbered_dirs(storage.list_dir(STATE_DIR)):
        operator_path = f"{STATE_DIR}/{operator}"
        for partition in _numbered_dirs(storage.list_dir(operator_path)):
            stores.extend(_partition_stores(storage, operator, partition, f"{operator_path}/{partition}"))
    return stores


def list_partition_stores(storage: CheckpointStorage, operator: int, partition: int) -> list[StateStoreDir]:
    """List the store directories of one operator partition (a worker handling a share of a
    checkpoint's partitions lists only those); [] when the partition directory is gone."""
    path = f"{STATE_DIR}/{operator}/{partition}"
    if not storage.exists(path):
        return []
    return _partition_stores(storage, operator, partition, path)


def _numbered_dirs(entries) -> list[int]:
    """The numeric directory names of a listing, in numeric order (``_metadata`` etc. skipped)."""
    numbers = (parse_batch_id(entry.name) for entry in entries if entry.is_dir)
    return sorted(number for number in numbers if number is not None)


def _partition_stores(storage: CheckpointStorage, operator: int, partition: int, path: str) -> list[StateStoreDir]:
    """The default store (files directly in the partition directory) and the named ones below it."""
    entries = storage.list_dir(path)
    named = [e.name for e in entries if e.is_dir and e.name not in ROCKSDB_DIRS and e.name != _SCHEMA_DIR]
    own = _store_files(entries)
    stores = []
    if own or not named:
        stores.append(StateStoreDir(operator, partition, DEFAULT_STORE_NAME, path, own))
    for name in sorted(named):
        store_path = f"{path}/{name}"
        stores.append(StateStoreDir(operator, partition, name, store_path, _store_files(storage.list_dir(store_path))))
    return stores


def _store_files(entries) -> tuple[StateFileInfo, ...]:
    """The files of a store directory, plus RocksDB's SSTs/ and logs/ directories."""
    return tuple(
        StateFileInfo(entry.name, entry.size, entry.is_dir)
        for entry in entries
        if not entry.is_dir or entry.name in ROCKSDB_DIRS
    )


def detect_provider(files: Iterable[StateFileInfo]) -> str:
    """Tell which provider wrote a store directory: "hdfs", "rocksdb", "unknown" or "empty".

    Checksum and temporary files do not count; RocksDB wins when both kinds are present.
    """
    names = [info.name for info in files if not _is_side_file(info.name)]
    if not names:
        return "empty"
    if any(name in ROCKSDB_DIRS or name.endswith(_ROCKSDB_SUFFIXES) for name in names):
        return "rocksdb"
    if any(_hdfs_file_kind(name) for name in names):
        return "hdfs"
    return "unknown"


def earliest_state_version(files: Iterable[StateFileInfo]) -> int | None:
    """The oldest version with a file in a store directory (``<v>.delta``, ``<v>.snapshot``,
    ``<v>[_<id>].changelog``, ``<v>[_<id>].zip``); None when it has none."""
    versions = [
        parse_batch_id(info.name.partition(".")[0].partition("_")[0])
        for info in files
        if not info.is_dir and not _is_side_file(info.name) and info.name.endswith(_VERSION_FILE_SUFFIXES)
    ]
    return min((version for version in versions if version is not None), default=None)


def parse_hdfs_state_files(files: Iterable[StateFileInfo]) -> tuple[tuple[HdfsStateFile, ...], tuple[str, ...]]:
    """Return the store files sorted by version, and the names that are neither those nor side files.

    As fetchFiles: only ``<version>.<delta|snapshot>`` (suffix case-insensitive) counts, and a
    snapshot shadows the delta of the same version. Hadoop ``.crc`` files, Spark 4.1+ ``N.crc``
    sidecars and temporary files are skipped silently.
    """
    by_version: dict[int, HdfsStateFile] = {}
    unknown = []
    for info in files:
        if info.is_dir or _is_side_file(info.name):
            continue
        parsed = _hdfs_file(info)
        if parsed is None:
            unknown.append(info.name)
        elif parsed.is_snapshot or parsed.version not in by_version:
            by_version[parsed.version] = parsed
    return tuple(by_version[version] for version in sorted(by_version)), tuple(unknown)


_VERSION_FILE_SUFFIXES = (".delta", ".snapshot", ".changelog", ".zip")


def _hdfs_file(info: StateFileInfo) -> HdfsStateFile | None:
    kind = _hdfs_file_kind(info.name)
    if kind is None:
        return None
    return HdfsStateFile(parse_batch_id(info.name.split(".")[0]), kind, info.name, info.size)


def _hdfs_file_kind(name: str) -> str | None:
    """Return "delta" or "snapshot" for a ``<version>.<kind>`` name, else None."""
    parts = name.split(".")
    if len(parts) != 2 or parse_batch_id(parts[0]) is None:
        return None
    return _HDFS_KINDS.get(parts[1].lower())


def _is_side_file(name: str) -> bool:
    """Hadoop ``.<name>.crc``, Spark's ``<name>.crc`` sidecars and atomic-write temp files."""
    return name.endswith(".crc") or is_temporary_file(name)


def files_for_version(
    state_files: Sequence[HdfsStateFile], version: int, *, source: str = "", require_complete: bool = True
) -> tuple[HdfsStateFile, ...]:
    """Return the files that rebuild ``version``: the latest snapshot at or below it, then deltas.

    As filesForVersion; ``source`` (the store directory) prefixes error paths. Raises
    MissingFileError when no file has that version, or when a delta between the snapshot and
    ``version`` is missing (Spark's "Unexpected list of delta files"). ``require_complete``
    also demands deltas 1..version when there is no snapshot, as loading the version does;
    without it the result is Spark's (all files up to ``version``).
    """
    if version < 0:
        raise ValueError(f"a state version is >= 0, not {version}")
    if not any(f.version == version for f in state_files):
        raise MissingFileError(_join(source, f"{version}.delta"), f"no delta or snapshot file for version {version}")
    snapshots = [f for f in state_files if f.is_snapshot and f.version <= version]
    base = snapshots[-1].version if snapshots else 0
    chain = [f for f in state_files if base < f.version <= version]
    if snapshots or require_complete:
        _check_deltas_present(chain, base, version, source)
    if snapshots:
        return (snapshots[-1], *chain)
    return tuple(f for f in state_files if f.version <= version)


def _check_deltas_present(deltas: Sequence[HdfsStateFile], base: int, version: int, source: str) -> None:
    present = {f.version for f in deltas}
    for expected in range(base + 1, version + 1):
        if expected not in present:
            raise MissingFileError(
                _join(source, f"{expected}.delta"),
                f"missing delta file: version {version} needs every delta after "
                + (f"snapshot {base}" if base else "version 0"),
            )


def summarize_hdfs_store(files: Sequence[StateFileInfo], *, committed_version: int | None = None) -> HdfsStoreSummary:
    """Summarize an HDFS-backed store directory; ``bytes_on_disk`` counts every file in it.

    With ``committed_version`` (the version the newest committed batch wrote), the versions after
    it are listed as uncommitted and left out of the latest version and the delta chain.
    """
    state_files, _ = parse_hdfs_state_files(files)
    uncommitted = ()
    if committed_version is not None:
        uncommitted = tuple(sorted({f.version for f in state_files if f.version > committed_version}))
        state_files = tuple(f for f in state_files if f.version <= committed_version)
    snapshots = [f.version for f in state_files if f.is_snapshot]
    last_snapshot = snapshots[-1] if snapshots else None
    deltas = sum(1 for f in state_files if not f.is_snapshot and f.version > (last_snapshot or 0))
    return HdfsStoreSummary(
        latest_version=state_files[-1].version if state_files else None,
        last_snapshot_version=last_snapshot,
        deltas_since_snapshot=deltas,
        bytes_on_disk=sum(info.size for info in files if not info.is_dir),
        uncommitted_versions=uncommitted,
    )


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name
