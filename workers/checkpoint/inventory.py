"""File inventory of a checkpoint: per directory, what is on storage and what reading it costs.

One ``DirectoryInventory`` row per part of the checkpoint:

    metadata       the root: the ``metadata`` file, its checksum, and the listings that find the rest
    offsets        ``offsets/``
    commits        ``commits/``
    sources/<i>    the log of source i (a file source's compactible log, Kafka's initial offsets...)
    state/<op>     one stateful operator: every partition and store, ``_metadata``, ``_stateSchema``
    sink-log       a file sink's ``_spark_metadata/``, which lives beside the sink's output
    other          any other top-level file or directory

Object-store cost of one full read (S3 ListObjectsV2 and GetObject; GCS and Azure page alike):

* LIST: a reader lists directory by directory with a "/" delimiter, as Spark's HDFSMetadataLog and
  this library do, and a page holds at most 1000 keys and sub-directories. So each directory costs
  ``ceil(entries / 1000)`` requests, and at least one even when empty. The listings of the root,
  ``sources/`` and ``state/``, which only find the other rows, are charged to the ``metadata`` row.
* GET: a full read (a backup, a complete sync) opens every file once except Hadoop ``.crc``
  checksums and temporary files, which no reader opens. Spark's own restart reads far fewer.

``small_files`` counts the files a full read opens that are smaller than ``SMALL_FILE_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from .errors import CheckpointError
from .fileinfo import FileInfo
from .layout import BACKUP_DIR, COMMITS_DIR, METADATA_FILE, OFFSETS_DIR, is_temporary_file, parse_batch_id
from .logdir import batch_ids_of
from .metadatalog import SINK_LOG_DIR, sink_log_location
from .rocksdbfiles import parse_rocksdb_store_files
from .stateinventory import STATE_DIR, StateStoreDir, list_state_store_dirs, parse_hdfs_state_files
from .storage.checkpointstorage import CheckpointStorage

DirectoryKind = Literal["offsets", "commits", "sources", "state", "sink-log", "metadata", "other"]

SOURCES_DIR = "sources"
# A file under 4 KiB is pure request overhead: it still fills a whole 4 KiB block on local and
# HDFS-like disks, and on an object store the ~10-50 ms a GET waits for its first byte dwarfs
# the microseconds its bytes take. Many of them in one directory (tiny state deltas of a quiet
# query, thousands of kept log files) are what snapshots and retention settings should shrink.
SMALL_FILE_BYTES = 4096
# S3 ListObjectsV2 MaxKeys (also the default page of GCS and Azure Blob listings).
LIST_PAGE_KEYS = 1000

# Temporary names of older writers that layout.is_temporary_file (CheckpointFileManager, Spark
# 2.3+) does not cover: HDFSMetadataLog of Spark 2.0-2.2 wrote ".<uuid>.tmp", and the Spark 2.x
# HDFS state store "temp-<random long>".
_LEGACY_TEMPORARY_FILE = re.compile(
    r"\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.tmp|temp--?[0-9]{1,19}"
)
_ROOT_FILES = frozenset({METADATA_FILE, f".{METADATA_FILE}.crc"})
_KIND_ORDER = ("metadata", "offsets", "commits", "sources", "state", "other", "sink-log")


@dataclass(frozen=True, slots=True)
class DirectoryInventory:
    """What one part of a checkpoint holds on storage, and what one full read of it costs.

    ``oldest_batch``/``newest_batch`` come from the batch files' names (None when there are
    none); for a state row they are the batches that wrote the oldest and newest state version
    kept (batch N writes version N + 1).
    """

    path: str
    kind: DirectoryKind
    files: int
    bytes: int
    small_files: int
    oldest_batch: int | None
    newest_batch: int | None
    list_requests: int
    get_requests: int


@dataclass(frozen=True, slots=True)
class TreeListing:
    """Every directory listed below a root: relative path ("" = the root) -> its entries.

    ``failures`` holds the errors of directories that could not be listed. ``list_dir`` replays
    a listing, so the readers of other modules can run on it without listing again.
    """

    directories: dict[str, tuple[FileInfo, ...]]
    failures: tuple[CheckpointError, ...] = ()
    # Batch ids of a log directory, worked out once: a sync asks for offsets/ and commits/ three
    # times (reconcile, integrity checks, restart files), 600,000 names at 100k batches.
    _batch_ids: dict[tuple[str, bool], list[int]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def list_dir(self, relpath: str = "") -> list[FileInfo]:
        """Return the entries of a listed directory, [] for one that was not listed (as missing)."""
        return list(self.directories.get(relpath, ()))

    def batch_ids(self, dirname: str, *, compactible: bool = False) -> list[int]:
        """logdir.list_batch_ids of a listed directory (a new list each time)."""
        key = (dirname, compactible)
        if key not in self._batch_ids:
            self._batch_ids[key] = batch_ids_of(self.directories.get(dirname, ()), compactible=compactible)
        return list(self._batch_ids[key])

    def iter_files(self) -> Iterator[tuple[str, FileInfo]]:
        """Yield (relative path, info) of every file, directory by directory."""
        for dirname, entries in self.directories.items():
            for info in entries:
                if not info.is_dir:
                    yield join_path(dirname, info.name), info


def join_path(dirname: str, name: str) -> str:
    """Join a relative directory ("" = root) and a name with '/'."""
    return f"{dirname}/{name}" if dirname else name


def list_tree(storage: CheckpointStorage, dirname: str = "") -> TreeListing:
    """List ``dirname`` and every directory below it, one LIST per directory, depth first in name order.

    A directory that cannot be listed is recorded in ``failures`` and the walk goes on.

    The order matters while a query runs: Spark writes offsets/N, then the state of version N+1,
    then commits/N (MicroBatchExecution), so listing commits/ before offsets/ and both before
    state/ (as name order does) never shows a commit whose offsets or state files were listed
    too early to be seen.

    The backups of maintenance runs (``_ckptweb_backup/`` at the root) are not walked: they are
    copies of old files, not part of what Spark reads, and their checksums would look orphaned.
    """
    directories: dict[str, tuple[FileInfo, ...]] = {}
    failures: list[CheckpointError] = []
    pending = [dirname]
    while pending:
        current = pending.pop()
        try:
            entries = tuple(storage.list_dir(current))
        except CheckpointError as exc:
            failures.append(exc)
            continue
        directories[current] = entries
        # Pushed in reverse name order, so that the next pop is the first name.
        below = (join_path(current, info.name) for info in entries if info.is_dir and not _is_backup(current, info))
        pending.extend(sorted(below, reverse=True))
    return TreeListing(dict(sorted(directories.items())), tuple(failures))


def _is_backup(dirname: str, info: FileInfo) -> bool:
    return dirname == "" and info.name == BACKUP_DIR


def take_inventory(
    storage: CheckpointStorage, *, sink_log: CheckpointStorage | None = None
) -> list[DirectoryInventory]:
    """List a checkpoint (and a file sink's log) and return its inventory rows.

    ``sink_log`` is rooted at a file sink's output directory or at its ``_spark_metadata``; its
    row is named by the log's full URL.

    Raises the StorageError of the first directory that could not be listed.
    """
    listing = _raise_first_failure(list_tree(storage))
    if sink_log is None:
        return build_inventory(listing)
    dirname, url = sink_log_location(sink_log)
    return build_inventory(listing, sink_log=_raise_first_failure(list_tree(sink_log, dirname)), sink_log_path=url)


def _raise_first_failure(listing: TreeListing) -> TreeListing:
    if listing.failures:
        raise listing.failures[0]
    return listing


def build_inventory(
    listing: TreeListing, *, sink_log: TreeListing | None = None, sink_log_path: str = SINK_LOG_DIR
) -> list[DirectoryInventory]:
    """Group a checkpoint's recursive listing into inventory rows (pure: reads nothing).

    ``sink_log`` is the listing of a file sink's log directory; its row is named ``sink_log_path``.
    """
    rows: dict[tuple[str, str], _Row] = {}
    for dirname, entries in listing.directories.items():
        _row(rows, _directory_row(dirname)).add_directory(entries)
    for path, info in listing.iter_files():
        key = _file_row(path)
        _row(rows, key).add_file(info, _batch_id(key[1], info.name))
    _add_state_versions(rows, list_state_store_dirs(listing))  # type: ignore[arg-type]
    if sink_log is not None:
        row = _row(rows, (sink_log_path, "sink-log"))
        for entries in sink_log.directories.values():
            row.add_directory(entries)
            for info in entries:
                if not info.is_dir:
                    row.add_file(info, _batch_id("sink-log", info.name))
    return [row.freeze(path, kind) for (path, kind), row in sorted(rows.items(), key=_row_order)]


@dataclass(slots=True)
class _Row:
    """The counters of one row while the listing is walked."""

    files: int = 0
    bytes: int = 0
    small_files: int = 0
    batches: list[int] = field(default_factory=list)
    list_requests: int = 0
    get_requests: int = 0

    def add_directory(self, entries: tuple[FileInfo, ...]) -> None:
        self.list_requests += max(1, -(-len(entries) // LIST_PAGE_KEYS))

    def add_file(self, info: FileInfo, batch_id: int | None) -> None:
        self.files += 1
        self.bytes += info.size
        if batch_id is not None:
            self.batches.append(batch_id)
        if is_side_file(info.name):
            return
        self.get_requests += 1
        self.small_files += info.size < SMALL_FILE_BYTES

    def freeze(self, path: str, kind: str) -> DirectoryInventory:
        return DirectoryInventory(
            path=path,
            kind=kind,  # type: ignore[arg-type]
            files=self.files,
            bytes=self.bytes,
            small_files=self.small_files,
            oldest_batch=min(self.batches, default=None),
            newest_batch=max(self.batches, default=None),
            list_requests=self.list_requests,
            get_requests=self.get_requests,
        )


def is_side_file(name: str) -> bool:
    """Tell whether no reader opens this file: a Hadoop ``.<name>.crc`` or a temporary file."""
    if name.isdigit():  # a batch file or a state version: the common case, decided without patterns
        return False
    return is_hadoop_checksum(name) or is_temporary_name(name)


def is_hadoop_checksum(name: str) -> bool:
    """Tell whether ``name`` is a Hadoop ChecksumFileSystem ``.<name>.crc`` file."""
    return name.startswith(".") and name.endswith(".crc") and len(name) > len("..crc")


def is_temporary_name(name: str) -> bool:
    """Tell whether ``name`` is a temporary file of an atomic write, by any Spark version."""
    return is_temporary_file(name) or _LEGACY_TEMPORARY_FILE.fullmatch(name) is not None


def _batch_id(kind: str, name: str) -> int | None:
    """The batch id a metadata-log file name stands for; state versions are counted elsewhere."""
    if kind in (OFFSETS_DIR, COMMITS_DIR):
        return parse_batch_id(name)
    if kind in ("sources", "sink-log"):
        return parse_batch_id(name, compactible=True)
    return None


def _row(rows: dict[tuple[str, str], _Row], key: tuple[str, str]) -> _Row:
    return rows.setdefault(key, _Row())


def _directory_row(dirname: str) -> tuple[str, str]:
    """The row a directory's LIST is charged to."""
    parts = dirname.split("/")
    if parts[0] in ("", SOURCES_DIR, STATE_DIR) and len(parts) == 1:
        return METADATA_FILE, "metadata"
    return _part_row(parts)


def _file_row(path: str) -> tuple[str, str]:
    """The row a file belongs to."""
    parts = path.split("/")
    if len(parts) == 1:
        return (METADATA_FILE, "metadata") if path in _ROOT_FILES else (path, "other")
    if parts[0] in (SOURCES_DIR, STATE_DIR) and len(parts) == 2:
        return parts[0], "other"  # a stray file directly in sources/ or state/
    return _part_row(parts)


def _part_row(parts: list[str]) -> tuple[str, str]:
    """The row of a path below the root, given as its segments."""
    top = parts[0]
    if top in (OFFSETS_DIR, COMMITS_DIR):
        return top, top
    if top in (SOURCES_DIR, STATE_DIR):
        return f"{top}/{parts[1]}", top
    return top, "other"


def _add_state_versions(rows: dict[tuple[str, str], _Row], stores: list[StateStoreDir]) -> None:
    """Record the batch that wrote each state version kept (version V is written by batch V - 1)."""
    for store in stores:
        versions = state_versions(store)
        _row(rows, (f"{STATE_DIR}/{store.operator}", "state")).batches.extend(v - 1 for v in versions)


def state_versions(store: StateStoreDir) -> list[int]:
    """The state versions a store directory has files for, whichever provider wrote them."""
    state_files, _ = parse_hdfs_state_files(store.files)
    rocksdb_versions = parse_rocksdb_store_files(store.files).versions
    return sorted({state_file.version for state_file in state_files} | set(rocksdb_versions))


def _row_order(item: tuple[tuple[str, str], _Row]) -> tuple[int, int, str]:
    (path, kind), _ = item
    suffix = path.rpartition("/")[2]
    return _KIND_ORDER.index(kind), int(suffix) if suffix.isdigit() else -1, path
