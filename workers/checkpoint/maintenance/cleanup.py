"""Cleanup state: delete state files no retained version needs, as Spark's cleanup does.

HDFSBackedStateStoreProvider.cleanup keeps ``minBatchesToRetain`` (100) versions loadable:
earliestVersionToRetain = latestVersion - minVersionsToRetain; if that is above 0, every file
older than the first file of filesForVersion(earliestVersionToRetain) (its snapshot, or the
first delta when there is none) goes. This action does the same per store, with two guards:

* "latest" is the newest version a committed batch wrote: a version written by a batch without
  a commit is rewritten when that batch runs again, and the batch before it is what a restart
  loads;
* every version from the oldest batch still in ``offsets/`` on stays loadable too, because a
  restart rolled back to that batch, or Spark's ``statestore`` reader, may load it.

A file goes with its sidecars (Spark's ``<name>.crc`` first, then Hadoop's CRCs), each deleted
just before it. Files go oldest first, so whatever a crash leaves is a contiguous suffix of the
store's versions: every retained version stays loadable at every step. Temporary files of
interrupted writes older than the integrity check's grace period are deleted too.

RocksDB stores in checkpoint format 1 are cleaned by rocksdbcleanup.py with the same guards (old
zips, changelogs, and the SSTs only old zips list); format 2 is refused.

The "retention" precondition replays the deletion on the listing and checks that every version
from the earliest retained one to the newest that loads now still loads afterwards.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import CheckpointError, MissingFileError
from ..fileinfo import FileInfo
from ..integrity.leftovers import TEMPORARY_FILE_GRACE_SECONDS
from ..inventory import is_temporary_name
from ..rocksdbfiles import LOG_DIR, SST_DIR, parse_rocksdb_store_files
from ..rocksdbstate import read_rocksdb_zip
from ..rocksdbzip import RocksDBCheckpointMetadata
from ..stateinventory import (
    HdfsStateFile,
    StateFileInfo,
    StateStoreDir,
    detect_provider,
    files_for_version,
    parse_hdfs_state_files,
)
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size, plural
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import MaintenancePlan, PlannedDelete, PlannedWrite, Precondition
from .planning import PlanStart, delete_with_sidecars, join, precondition_unless, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .rocksdbcleanup import RocksDBStoreListing, ZipMetadata, plan_rocksdb_store_cleanup
from .statestores import (
    NO_STATE_STORE,
    StateListings,
    committed_state_version,
    list_state_listings,
    loadable_versions,
    providers_supported,
    select_stores,
    stores_exist,
    stores_parameter,
    survey_stores,
    version_committed,
)

ACTION = "cleanup"
# spark.sql.streaming.minBatchesToRetain
DEFAULT_MIN_VERSIONS_TO_RETAIN = 100


def plan_cleanup(
    storage: CheckpointStorage,
    *,
    now: float,
    min_versions_to_retain: int = DEFAULT_MIN_VERSIONS_TO_RETAIN,
    stores: Collection[str] | None = None,
    keep_offsets_range: bool = True,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """List the logs and ``state/``, read the metadata of RocksDB zips, and plan (see cleanup_plan_from_listings)."""
    listings = list_state_listings(storage)
    chosen, _ = select_stores(listings.stores, stores)
    return cleanup_plan_from_listings(
        listings,
        zip_metadata=read_zip_metadata(storage, chosen),
        now=now,
        min_versions_to_retain=min_versions_to_retain,
        stores=stores,
        keep_offsets_range=keep_offsets_range,
        quiet_seconds=quiet_seconds,
    )


def read_zip_metadata(
    storage: CheckpointStorage, stores: Sequence[StateStoreDir]
) -> dict[str, RocksDBCheckpointMetadata | None]:
    """Read the metadata of every zip of the RocksDB stores (one GET each); None for an unreadable zip."""
    metadata: dict[str, RocksDBCheckpointMetadata | None] = {}
    for store in stores:
        if detect_provider(store.files) != "rocksdb":
            continue
        for zip_file in parse_rocksdb_store_files(store.files).zips:
            path = join(store.path, zip_file.name)
            try:
                metadata[path] = read_rocksdb_zip(storage, path)
            except CheckpointError:
                metadata[path] = None
    return metadata


def cleanup_plan_from_listings(
    listings: StateListings,
    *,
    now: float,
    zip_metadata: ZipMetadata | None = None,
    min_versions_to_retain: int = DEFAULT_MIN_VERSIONS_TO_RETAIN,
    stores: Collection[str] | None = None,
    keep_offsets_range: bool = True,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """Plan the deletion of every state file older than what the retained versions load.

    ``zip_metadata`` holds the metadata of the RocksDB stores' zips by path (read_zip_metadata);
    a RocksDB store whose zips are missing from it is left alone. ``stores`` limits the action
    to these store paths (``state/<op>/<part>[/<store>]``). ``keep_offsets_range=False`` drops
    the guard for the batches still in ``offsets/`` (only what ``min_versions_to_retain`` keeps
    stays): a restart needs only the newest versions, and a purge that keeps offsets for every
    state version on disk needs this cleanup to go first.
    """
    _check_min_versions_to_retain(min_versions_to_retain)
    parameters = {
        "min_versions_to_retain": min_versions_to_retain,
        "stores": stores_parameter(stores),
        "keep_offsets_range": keep_offsets_range,
    }
    start = start_plan(ACTION, parameters, listings.offsets, listings.commits, now=now, quiet_seconds=quiet_seconds)
    return _survey_and_finish(start, listings, zip_metadata, stores)


def _survey_and_finish(
    start: PlanStart, listings: StateListings, zip_metadata: ZipMetadata | None, stores: Collection[str] | None
) -> MaintenancePlan:
    """Survey the chosen ``stores`` (all when None) and turn what it found into the plan."""
    retain, keep_offsets_range = start.parameters["min_versions_to_retain"], start.parameters["keep_offsets_range"]
    survey = _Survey.of_request(listings, zip_metadata, start.now, retain, keep_offsets_range)
    chosen, unknown = survey_stores(listings.stores, stores, survey.add)
    deletes = survey.deletes + survey.temporaries
    return start.finish(
        deletes=deletes,
        preconditions=_preconditions(survey, unknown),
        summary=_summary(survey, deletes, stores_chosen=len(chosen)),
        notes=survey.notes,
    )


def _check_min_versions_to_retain(min_versions_to_retain: int) -> None:
    if min_versions_to_retain < 1:
        raise ValueError(f"min_versions_to_retain must be >= 1 (as minBatchesToRetain), not {min_versions_to_retain}")


def _preconditions(survey: _Survey, unknown: Sequence[str]) -> tuple[Precondition, ...]:
    """The plan's own preconditions, after the ``survey`` of the stores (``unknown``: stores asked for but absent)."""
    return (
        _committed_precondition(survey.committed),
        stores_exist(unknown),
        _provider_precondition(survey.refused),
        precondition_unless("retention", survey.lost, survey.retention_detail()),
    )


@dataclass
class _Survey:
    """The stores looked at: files to delete, what stays loadable, and why a store was left alone."""

    now: float
    listings: StateListings
    zip_metadata: ZipMetadata
    committed: int | None
    retain: int
    protect_from: int | None
    deletes: list[PlannedDelete] = field(default_factory=list)
    temporaries: list[PlannedDelete] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    checked_versions: int = 0
    oldest_version: int | None = None

    @classmethod
    def of_request(
        cls,
        listings: StateListings,
        zip_metadata: ZipMetadata | None,
        now: float,
        min_versions_to_retain: int,
        keep_offsets_range: bool,
    ) -> _Survey:
        """An empty survey with what the request keeps: the newest committed version and the batches in offsets/."""
        offset_ids = listings.offset_ids
        return cls(
            now=now,
            listings=listings,
            zip_metadata=zip_metadata or {},
            committed=committed_state_version(listings.commit_ids),
            retain=min_versions_to_retain,
            protect_from=offset_ids[0] if offset_ids and keep_offsets_range else None,
        )

    def add(self, store: StateStoreDir) -> None:
        provider = detect_provider(store.files)
        entries = self.listings.entries(store)
        self._add_temporaries(store.path, entries)
        if provider == "rocksdb":
            self._add_rocksdb(store, entries)
        elif provider == "hdfs" and self.committed is not None:
            self._add_hdfs(store, entries)

    def _retained_range(self, versions: Sequence[int]) -> tuple[int, int] | None:
        """The newest committed version present and the oldest to keep loadable, as cleanup computes them.

        latest - minVersionsToRetain, moved back to the oldest batch in offsets/ when that is older.
        """
        if versions:
            self.oldest_version = min(versions) if self.oldest_version is None else min(self.oldest_version, *versions)
        latest = max((v for v in versions if v <= self.committed), default=None) if self.committed else None
        if latest is None:
            return None
        earliest = latest - self.retain
        return latest, earliest if self.protect_from is None else min(earliest, self.protect_from)

    def _add_hdfs(self, store: StateStoreDir, entries: Mapping[str, FileInfo]) -> None:
        state_files, _ = parse_hdfs_state_files(store.files)
        retained = self._retained_range([f.version for f in state_files])
        cutoff = None if retained is None else _cutoff_version(state_files, retained[1])
        if cutoff is None:
            self.notes.append(f"{store.path}: every file is needed by a retained version")
            return
        doomed = sorted(
            (f for f in _every_state_file(store.files) if f.version < cutoff), key=lambda f: (f.version, f.is_snapshot)
        )
        for state_file in doomed:
            reason = f"version {state_file.version} < {cutoff}, the oldest file a retained version loads"
            self._delete(store.path, state_file.name, entries, reason)
        self._check_retention(store, state_files, {f.name for f in doomed}, cutoff)

    def _add_rocksdb(self, store: StateStoreDir, entries: Mapping[str, FileInfo]) -> None:
        listing = self._rocksdb_listing(store, entries)
        if listing.files.checkpoint_format != 1:
            self.refused.append(store.path)
            return
        retained = self._retained_range(listing.files.versions)
        if retained is None:
            self.notes.append(f"{store.path}: no state version written by a committed batch")
            return
        result = plan_rocksdb_store_cleanup(listing, self.zip_metadata, latest=retained[0], earliest=retained[1])
        self.deletes.extend(result.deletes)
        self.lost.extend(result.lost)
        self.checked_versions += result.checked_versions
        if result.note:
            self.notes.append(result.note)

    def _rocksdb_listing(self, store: StateStoreDir, entries: Mapping[str, FileInfo]) -> RocksDBStoreListing:
        def listed(name: str) -> dict[str, FileInfo]:
            return {i.name: i for i in self.listings.state.list_dir(join(store.path, name)) if not i.is_dir}

        ssts, logs = listed(SST_DIR), listed(LOG_DIR)
        files = parse_rocksdb_store_files(
            store.files,
            [StateFileInfo(i.name, i.size) for i in ssts.values()],
            [StateFileInfo(i.name, i.size) for i in logs.values()],
        )
        return RocksDBStoreListing(store.path, files, entries, ssts, logs)

    def _delete(self, directory: str, name: str, entries: Mapping[str, FileInfo], reason: str) -> None:
        """Plan the deletion of ``name``, its sidecars first."""
        target = self.temporaries if is_temporary_name(name) else self.deletes
        target += delete_with_sidecars(directory, name, entries, reason, sidecar_reason=f"sidecar of {name}")

    def _add_temporaries(self, directory: str, entries: Mapping[str, FileInfo]) -> None:
        for name, info in sorted(entries.items()):
            age = None if info.mtime is None else self.now - info.mtime
            if is_temporary_name(name) and age is not None and age > TEMPORARY_FILE_GRACE_SECONDS:
                self._delete(directory, name, entries, f"temporary file of an interrupted write, {age:.0f} s old")

    def _check_retention(
        self, store: StateStoreDir, state_files: Sequence[HdfsStateFile], doomed: set[str], cutoff: int
    ) -> None:
        """Every version from ``cutoff`` on that loads now must load from what remains."""
        remaining = [info for info in store.files if info.name not in doomed]
        before = {v for v in loadable_versions(state_files) if v >= cutoff}
        after = loadable_versions(parse_hdfs_state_files(remaining)[0])
        self.checked_versions += len(before)
        lost = sorted(before - after)
        if lost:
            self.lost.append(f"{store.path}: versions {lost[0]}..{lost[-1]} would no longer load")

    def retention_detail(self) -> str:
        return f"{self.checked_versions} retained store versions checked: each still loads from the files that remain"


def _cutoff_version(state_files: Sequence[HdfsStateFile], earliest: int) -> int | None:
    """The version of the oldest file to keep, or None when nothing may go.

    As cleanup: the first file of filesForVersion(earliest), anchored at the first version
    present from ``earliest`` on.
    """
    versions = [f.version for f in state_files]
    if earliest <= 0:
        return None
    anchor = next((v for v in versions if v >= earliest), None)
    if anchor is None:
        return None
    try:
        first = files_for_version(state_files, anchor, require_complete=False)[0].version
    except MissingFileError:
        return None  # a delta after the snapshot is already missing: Spark's cleanup fails here too
    return first if first > versions[0] else None


def _every_state_file(files: Sequence[StateFileInfo]) -> list[HdfsStateFile]:
    """Every ``N.delta`` and ``N.snapshot``, a delta shadowed by its version's snapshot included."""
    return [state_file for info in files for state_file in parse_hdfs_state_files([info])[0]]


def _committed_precondition(committed: int | None) -> Precondition:
    return version_committed(
        committed, none_committed="nothing is known to be retained", final=f"it wrote state version {committed}"
    )


def _provider_precondition(refused: Sequence[str]) -> Precondition:
    return providers_supported(
        "supported-provider",
        refused,
        "cleanup of RocksDB stores in checkpoint format 2 (<version>_<uuid> files) is not supported: "
        "Spark's RocksDB provider cleans them (deleteOldVersions)",
        "every chosen store is HDFS-backed or RocksDB in checkpoint format 1",
    )


def _summary(survey: _Survey, deletes: Sequence[PlannedDelete], *, stores_chosen: int) -> str:
    if deletes:
        freed = sum(d.size for d in deletes)
        return (
            f"delete {plural(len(survey.deletes), 'state file or sidecar', 'state files and sidecars')} and "
            f"{plural(len(survey.temporaries), 'temporary file')}, freeing {format_size(freed)}"
        )
    if not stores_chosen:
        return NO_STATE_STORE
    if len(survey.refused) == stores_chosen:
        return "nothing to do: every store is RocksDB in checkpoint format 2, which Spark's RocksDB provider cleans"
    return explain_nothing_to_clean(
        oldest=survey.oldest_version, latest=survey.committed, retain=survey.retain, protect_from=survey.protect_from
    )


def explain_nothing_to_clean(*, oldest: int | None, latest: int | None, retain: int, protect_from: int | None) -> str:
    """Say why no state file goes when versions from ``oldest`` are on disk and ``latest`` is the newest
    committed one, and what request would delete some."""
    if latest is None:
        return "nothing to do: no batch is committed, so no state version is known to be final"
    if oldest is None:
        return "nothing to do: the state stores hold no version yet"
    kept_by_count = latest - retain
    earliest = kept_by_count if protect_from is None else min(kept_by_count, protect_from)
    on_disk = f"version {oldest}" if oldest >= latest else f"versions {oldest}–{latest}"
    if earliest > oldest:
        return (
            f"nothing to do: versions {earliest}–{latest} are retained and load through the files "
            f"from version {oldest}; "
            f"older files go once a snapshot (RocksDB: a zip) at or below version {earliest} exists"
        )
    if protect_from is not None and protect_from < kept_by_count:
        return (
            f"nothing to do: {on_disk} on disk must stay loadable because offsets/ still holds batch {protect_from} "
            "(the option to keep the state of every batch still in offsets/); turn it off, or purge offsets/ first"
        )
    return _all_retained(on_disk, oldest=oldest, latest=latest, retain=retain)


def _all_retained(on_disk: str, *, oldest: int, latest: int, retain: int) -> str:
    """Why nothing goes when retaining ``retain`` versions keeps every one ``on_disk``, and what retains fewer."""
    fewer = latest - oldest - 1
    change = f"; retaining {fewer} or fewer would retain less than is on disk" if fewer >= 1 else ""
    retaining = plural(retain, "state version")
    return f"nothing to do: retaining {retaining} keeps {on_disk}, all that is on disk{change}"


def _no_content(storage: CheckpointStorage, write: PlannedWrite) -> bytes:
    raise ValueError(f"a cleanup plan writes nothing, yet it lists {write.path}")


def apply_cleanup(storage: CheckpointStorage, plan: MaintenancePlan, *, on_step: StepHook | None = None) -> AppliedPlan:
    """Delete the files of a confirmed cleanup plan, in its order (oldest first, sidecars before files)."""
    if plan.action != ACTION:
        raise ValueError(f"not a cleanup plan: {plan.action!r}")
    return apply_plan(storage, plan, _no_content, on_step=on_step)


__all__ = [
    "DEFAULT_MIN_VERSIONS_TO_RETAIN",
    "apply_cleanup",
    "explain_nothing_to_clean",
    "plan_cleanup",
    "cleanup_plan_from_listings",
]
