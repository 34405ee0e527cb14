"""Follow what Spark writes and deletes beyond offsets/ and commits/ by asking for the names that
can appear, without listing (as probe.py does for the logs).

- A compactible log (a file source's ``sources/<i>``, a file sink's ``_spark_metadata``) grows by
  one file per batch, named ``N`` or, every compact interval, ``N.compact``
  (CompactibleFileStreamLog.batchIdToPath): after batch N the next name is known.
- A state store's maintenance writes a snapshot of a version it holds (HDFS ``<v>.snapshot``,
  RocksDB ``<v>.zip`` or ``<v>_<id>.zip``), any version since it last looked, and deletes the
  oldest versions (HDFSBackedStateStoreProvider.cleanup, RocksDBFileManager.deleteOldVersions):
  the oldest version known is there or not.

Each costs one call per name, whatever the history. What the names cannot tell (a file the next
name should follow is missing, a read fails) raises CheckpointError: the caller walks in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .compactible import COMPACTIBLE_LOG_MAX_VERSION
from .errors import CheckpointError
from .layout import COMPACT_FILE_SUFFIX
from .metadatalog import LogKind, MetadataLogSummary, batch_file_name, count_live_entries
from .storage.checkpointstorage import CheckpointStorage

# One probe reads at most this many new log files: a log far ahead is caught up over several syncs.
MAX_LOG_PROBES = 1_000
# Maintenance snapshots the newest version it holds (HDFS: the newest file it lists; RocksDB: the
# version a commit queued for upload), which can be a few versions older than the newest the last
# probe saw when a batch commits meanwhile. A snapshot of an older version is the full walk's to see.
SNAPSHOT_LOOK_BACK = 10


@dataclass(frozen=True, slots=True)
class KnownLog:
    """What is known of one compactible log: its folder (relative to its storage) and latest batch."""

    path: str
    kind: LogKind
    compact_interval: int
    latest_batch: int | None
    latest_compact_bytes: int


def follow_metadata_log(storage: CheckpointStorage, log: KnownLog) -> MetadataLogSummary | None:
    """Read the log's batch files after ``log.latest_batch`` until one is missing; None when none is new.

    The live entries are counted again from the files Spark's allFiles reads (the latest
    compaction and the batches after it: at most one compact interval of files).
    """
    latest, compacts = _probe_new_batches(storage, log)
    if latest is None:
        return None
    return MetadataLogSummary(
        path=log.path,
        kind=log.kind,
        version=COMPACTIBLE_LOG_MAX_VERSION,
        compact_interval=log.compact_interval,
        latest_batch=latest,
        compact_batches=tuple(batch_id for batch_id, _ in compacts),
        live_entries=count_live_entries(storage, log.path, log.kind, latest, log.compact_interval),
        latest_compact_bytes=compacts[-1][1] if compacts else log.latest_compact_bytes,
        compact_file_bytes=tuple(compacts),
    )


def _probe_new_batches(storage: CheckpointStorage, log: KnownLog) -> tuple[int | None, list[tuple[int, int]]]:
    """Read the batch files after ``log.latest_batch`` until one is missing (at most MAX_LOG_PROBES):
    the latest one read (None: none), and (batch id, size) of each compaction file read."""
    first = 0 if log.latest_batch is None else log.latest_batch + 1
    compacts: list[tuple[int, int]] = []
    latest = None
    for batch_id in range(first, first + MAX_LOG_PROBES):
        name = batch_file_name(batch_id, log.compact_interval)
        data = storage.find_bytes(_join(log.path, name))
        if data is None:
            _check_not_named_otherwise(storage, log, batch_id, name)
            break
        latest = batch_id
        if name != str(batch_id):
            compacts.append((batch_id, len(data)))
    if latest is None and log.latest_batch is not None:
        _check_known_latest_still_there(storage, log)
    return latest, compacts


def _check_known_latest_still_there(storage: CheckpointStorage, log: KnownLog) -> None:
    """Raise CheckpointError when the known latest batch's file is gone while no later one follows it.

    Spark deletes a log's batch files only once a later compaction covers them, and only when
    older than spark.sql.streaming.fileSink.log.cleanupDelay / fileSource.log.cleanupDelay
    (CompactibleFileStreamLog.deleteExpiredLog). A sync that did not probe for that long (the
    server down, a long probe interval, a short delay) finds the next name already deleted: the
    log moved past what is known, and only a listing tells where it is now.
    """
    name = batch_file_name(log.latest_batch, log.compact_interval)
    if not storage.has_file(_join(log.path, name)):
        raise CheckpointError(
            _join(log.path, name),
            f"batch {log.latest_batch}, the latest known, is gone and batch {log.latest_batch + 1} is not "
            "there: Spark compacted the log past it and deleted the older files",
        )


def _check_not_named_otherwise(storage: CheckpointStorage, log: KnownLog, batch_id: int, name: str) -> None:
    """Raise CheckpointError when the next batch is there under the other name (``N`` for
    ``N.compact`` or the reverse): the log's compact interval is not the one the walk derived."""
    other = str(batch_id) if name != str(batch_id) else f"{batch_id}{COMPACT_FILE_SUFFIX}"
    if storage.has_file(_join(log.path, other)):
        raise CheckpointError(
            _join(log.path, other), f"batch {batch_id} is not named as compact interval {log.compact_interval} says"
        )


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


@dataclass(frozen=True, slots=True)
class KnownStore:
    """What is known of one state store directory: its provider, oldest and newest versions, and
    the newest version storage was looked at for snapshots."""

    path: str
    provider: str
    earliest_version: int | None
    latest_version: int | None
    snapshot_version: int | None
    probed_version: int | None


def store_maintenance_seen(storage: CheckpointStorage, store: KnownStore, unique_ids: Mapping[int, str]) -> bool:
    """Tell whether maintenance wrote a snapshot since ``probed_version`` or deleted the oldest version.

    ``unique_ids`` maps version -> unique id (RocksDB checkpoint format 2). Raises CheckpointError
    when storage cannot be asked.
    """
    if store.latest_version is None or store.provider not in ("hdfs", "rocksdb"):
        return False
    # From a little before the version last looked at, past the newest snapshot already counted.
    first = (store.latest_version if store.probed_version is None else store.probed_version) - SNAPSHOT_LOOK_BACK
    first = max(first, 1 if store.snapshot_version is None else store.snapshot_version + 1)
    for version in range(first, store.latest_version + 1):
        if any(storage.has_file(name) for name in _snapshot_names(store, version, unique_ids.get(version))):
            return True
    earliest = store.earliest_version
    # A format-2 RocksDB version whose unique id is not known (its commit was purged before the
    # checkpoint was registered) cannot be named: its deletion is the full walk's to see.
    if earliest is None or (store.provider == "rocksdb" and unique_ids and earliest not in unique_ids):
        return False
    return not any(storage.has_file(name) for name in _version_names(store, earliest, unique_ids.get(earliest)))


def _snapshot_names(store: KnownStore, version: int, unique_id: str | None) -> list[str]:
    if store.provider == "hdfs":
        return [f"{store.path}/{version}.snapshot"]
    return [f"{store.path}/{stem}.zip" for stem in _stems(version, unique_id)]


def _version_names(store: KnownStore, version: int, unique_id: str | None) -> list[str]:
    """The files that keep ``version`` on storage: its delta or changelog first (written for every
    version), then its snapshot or zip (a version may have only that)."""
    if store.provider == "hdfs":
        return [f"{store.path}/{version}.delta", f"{store.path}/{version}.snapshot"]
    stems = _stems(version, unique_id)
    return [f"{store.path}/{stem}.{suffix}" for suffix in ("changelog", "zip") for stem in stems]


def _stems(version: int, unique_id: str | None) -> list[str]:
    return [f"{version}_{unique_id}", str(version)] if unique_id else [str(version)]
