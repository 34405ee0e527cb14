"""Cleanup of one RocksDB state store (checkpoint format 1), the part of cleanup.py for RocksDB.

RocksDBFileManager.deleteOldVersions keeps ``minBatchesToRetain`` versions loadable: the newest
zip at or below the earliest version to retain stays, older zips go, and so do the changelogs
before it and the SST (and archived log) files that only the deleted zips list. Loading version
V reads the newest ``<s>.zip`` with s <= V, every SST its metadata lists, and the changelogs
s+1..V (rocksdbloadchain.resolve_load_chain). This module plans the same with cleanup.py's guards
(the newest committed version, the batches still in ``offsets/``), and is stricter than Spark:

* SST files no zip lists (Spark deletes such orphans by age) stay: they may belong to a version a
  batch without a commit was uploading;
* the changelog of the kept zip's own version stays, as Spark keeps it;
* checkpoint format 2 (``<v>_<uuid>`` files, several per version after retries) is refused.

Order: first the SST and log files only the doomed zips list, then the zips, then the changelogs,
oldest first, each after its sidecars. A crash leaves every retained version whole, and a plan
made again afterwards still finds the remaining SSTs through the zips that are not yet deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..fileinfo import FileInfo
from ..rocksdbfiles import LOG_DIR, SST_DIR, RocksDBStoreFiles, RocksDBVersionFile
from ..rocksdbloadchain import resolve_load_chain
from ..rocksdbzip import RocksDBCheckpointMetadata
from .plan import PlannedDelete
from .planning import delete_with_sidecars, join

# A zip's metadata by the zip's path, as the caller read it (None: unreadable).
ZipMetadata = Mapping[str, RocksDBCheckpointMetadata | None]


@dataclass(slots=True)
class RocksDBStoreCleanup:
    """What cleaning one store deletes, the versions that would stop loading, and why it did nothing."""

    deletes: list[PlannedDelete] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    checked_versions: int = 0
    note: str = ""


@dataclass(frozen=True, slots=True)
class RocksDBStoreListing:
    """A RocksDB store directory: its parsed files and the entries of it, ``SSTs/`` and ``logs/``."""

    path: str
    files: RocksDBStoreFiles
    entries: Mapping[str, FileInfo]
    sst_entries: Mapping[str, FileInfo]
    log_entries: Mapping[str, FileInfo]


def plan_rocksdb_store_cleanup(
    store: RocksDBStoreListing, metadata: ZipMetadata, *, latest: int, earliest: int
) -> RocksDBStoreCleanup:
    """Plan the deletions that keep every version from ``earliest`` to ``latest`` loadable.

    ``latest`` is the newest version a committed batch wrote, ``earliest`` the oldest version to
    keep (latest - minBatchesToRetain, or older to keep the batches in ``offsets/``).
    """
    result = RocksDBStoreCleanup()
    base, result.note = _oldest_kept_zip(store, metadata, latest=latest, earliest=earliest)
    if base is None:
        return result
    _delete_older_than(result, store, metadata, base)
    _check_retention(result, store, metadata, base.version, {d.path for d in result.deletes})
    return result


def _oldest_kept_zip(
    store: RocksDBStoreListing, metadata: ZipMetadata, *, latest: int, earliest: int
) -> tuple[RocksDBVersionFile | None, str]:
    """The zip the ``earliest`` version loads from, or None and why nothing can be deleted."""
    if earliest <= 0:
        return None, f"{store.path}: every version up to {latest} is retained"
    base = resolve_load_chain(store.files, earliest).snapshot
    if base is None:
        return None, f"{store.path}: no zip at or below version {earliest}; every file is needed"
    unreadable = [z.name for z in store.files.zips if metadata.get(join(store.path, z.name)) is None]
    if unreadable:
        return None, f"{store.path}: zip metadata unreadable ({', '.join(unreadable)}); nothing deleted"
    return base, ""


def _delete_older_than(
    result: RocksDBStoreCleanup, store: RocksDBStoreListing, metadata: ZipMetadata, base: RocksDBVersionFile
) -> None:
    """Add to ``result`` the zips and changelogs older than ``base``, and the files only they list."""
    doomed_zips = [z for z in store.files.zips if z.version < base.version]
    doomed_changelogs = [c for c in store.files.changelogs if c.version < base.version]
    kept_zips = [z for z in store.files.zips if z.version >= base.version]
    _delete_unshared(result, store, metadata, (doomed_zips, kept_zips), base)
    older = f"version older than {base.name}, the oldest zip a retained version loads"
    _delete_each(result, store.path, [z.name for z in doomed_zips], store.entries, older)
    _delete_each(result, store.path, [c.name for c in doomed_changelogs], store.entries, older)


def _delete_unshared(
    result: RocksDBStoreCleanup,
    store: RocksDBStoreListing,
    metadata: ZipMetadata,
    zips: tuple[Sequence[RocksDBVersionFile], Sequence[RocksDBVersionFile]],
    base: RocksDBVersionFile,
) -> None:
    """Add to ``result`` the SST and log files that the doomed zips list and no kept one does (``zips``)."""
    doomed_ssts, doomed_logs = _unshared_files(store.path, *zips, metadata)
    reason = f"only zips older than {base.name} (the oldest zip a retained version loads) list it"
    _delete_each(
        result, f"{store.path}/{SST_DIR}", sorted(doomed_ssts & set(store.sst_entries)), store.sst_entries, reason
    )
    _delete_each(
        result, f"{store.path}/{LOG_DIR}", sorted(doomed_logs & set(store.log_entries)), store.log_entries, reason
    )


def _unshared_files(
    path: str, doomed: Sequence[RocksDBVersionFile], kept: Sequence[RocksDBVersionFile], metadata: ZipMetadata
) -> tuple[set[str], set[str]]:
    """The SST and log file names the doomed zips list and no kept zip does."""

    def names(zips: Sequence[RocksDBVersionFile], pick: Callable[[RocksDBCheckpointMetadata], tuple]) -> set[str]:
        return {f.dfs_file_name for z in zips for f in pick(metadata[join(path, z.name)])}

    ssts = names(doomed, lambda m: m.sst_files) - names(kept, lambda m: m.sst_files)
    logs = names(doomed, lambda m: m.log_files) - names(kept, lambda m: m.log_files)
    return ssts, logs


def _delete_each(
    result: RocksDBStoreCleanup, directory: str, names: Sequence[str], entries: Mapping[str, FileInfo], reason: str
) -> None:
    for name in names:
        result.deletes += delete_with_sidecars(directory, name, entries, reason, sidecar_reason=f"sidecar of {name}")


def _check_retention(
    result: RocksDBStoreCleanup, store: RocksDBStoreListing, metadata: ZipMetadata, first: int, deleted: set[str]
) -> None:
    """Every version from ``first`` on that loads now (zip, its SSTs, changelogs) must load afterwards."""
    before = _loadable(store, metadata, set())
    after = _loadable(store, metadata, deleted)
    kept = {v for v in before if v >= first}
    result.checked_versions = len(kept)
    lost = sorted(kept - after)
    if lost:
        result.lost.append(f"{store.path}: versions {lost[0]}..{lost[-1]} would no longer load")


def _loadable(store: RocksDBStoreListing, metadata: ZipMetadata, deleted: set[str]) -> set[int]:
    """The versions of the store that load once the ``deleted`` paths are gone."""
    ssts = _names_left(store.sst_entries, f"{store.path}/{SST_DIR}", deleted)
    logs = _names_left(store.log_entries, f"{store.path}/{LOG_DIR}", deleted)
    files = _version_files_left(store, deleted)
    loadable = set()
    for version in files.versions:
        chain = resolve_load_chain(files, version)
        zip_metadata = metadata.get(join(store.path, chain.snapshot.name)) if chain.snapshot else None
        if chain.is_loadable and (chain.snapshot is None or _zip_files_left(zip_metadata, ssts, logs)):
            loadable.add(version)
    return loadable


def _names_left(names: Iterable[str], directory: str, deleted: set[str]) -> set[str]:
    return {name for name in names if join(directory, name) not in deleted}


def _version_files_left(store: RocksDBStoreListing, deleted: set[str]) -> RocksDBStoreFiles:
    """The store's zips and changelogs that are not among the ``deleted`` paths."""
    present = {join(store.path, n) for n in store.entries} - deleted
    return RocksDBStoreFiles(
        zips=tuple(z for z in store.files.zips if join(store.path, z.name) in present),
        changelogs=tuple(c for c in store.files.changelogs if join(store.path, c.name) in present),
        sst_files=(),
        log_files=(),
        unknown=(),
    )


def _zip_files_left(zip_metadata: RocksDBCheckpointMetadata | None, ssts: set[str], logs: set[str]) -> bool:
    """The zip's metadata is readable and every SST and log file it lists is among ``ssts`` and ``logs``."""
    return (
        zip_metadata is not None
        and all(f.dfs_file_name in ssts for f in zip_metadata.sst_files)
        and all(f.dfs_file_name in logs for f in zip_metadata.log_files)
    )
