"""RocksDBStateStoreProvider stores read through storage: list a store, read its zips and
changelogs, and summarise every version's row count.

The formats live beside it and take bytes or listings: the files of a store directory
(rocksdbfiles.py), a zip's RocksDBCheckpointMetadata (rocksdbzip.py), changelogs
(rocksdbchangelog.py) and which files load a version (rocksdbloadchain.py). This module is the
one that does the reads, so the parsers stay pure.

Row counts here are the cheap ones, for every version: a zip's ``numKeys`` is the count at its
version, and a replay from version 0 counts the keys exactly. On top of a zip whether a put adds
a key or overwrites one is only known from the zip's SST files: rocksdbrows.py reads them, for
one version at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import CheckpointError
from .rocksdbchangelog import LineageItem, StateStoreChangelog, parse_changelog
from .rocksdbfiles import LOG_DIR, SST_DIR, RocksDBStoreFiles, RocksDBVersionFile, parse_rocksdb_store_files
from .rocksdbloadchain import RocksDBLoadChain, resolve_load_chain
from .rocksdbzip import MAX_ZIP_BYTES, RocksDBCheckpointMetadata, parse_rocksdb_zip
from .statecodec import MAX_STATE_FILE_BYTES
from .stateinventory import StateFileInfo, StateStoreDir
from .storage.checkpointstorage import CheckpointStorage
from .wording import plural


@dataclass(frozen=True, slots=True)
class RocksDBVersionState:
    """One version: its load chain, the SST/log files its zip lists that are absent, its row count.

    ``num_rows_source`` says how ``num_rows`` was found, or why it is None.
    """

    version: int
    chain: RocksDBLoadChain
    missing_immutable_files: tuple[str, ...]
    num_rows: int | None
    num_rows_source: str

    @property
    def is_loadable(self) -> bool:
        return self.chain.is_loadable and not self.missing_immutable_files


@dataclass(frozen=True, slots=True)
class RocksDBStoreSummary:
    """A RocksDB store directory: files, every version's state, SSTs no kept zip lists, errors."""

    operator: int
    partition: int
    store: str
    path: str
    files: RocksDBStoreFiles
    versions: tuple[RocksDBVersionState, ...]
    unreferenced_sst_files: tuple[str, ...]
    bytes_on_disk: int
    errors: tuple[str, ...]

    @property
    def latest(self) -> RocksDBVersionState | None:
        return self.versions[-1] if self.versions else None


def list_rocksdb_store_files(storage: CheckpointStorage, store: StateStoreDir) -> RocksDBStoreFiles:
    """Add the listings of the store's SSTs/ and logs/ (one LIST each, only if they exist)."""
    subdirs = {info.name for info in store.files if info.is_dir}
    listed = {
        name: [StateFileInfo(e.name, e.size) for e in storage.list_dir(f"{store.path}/{name}") if not e.is_dir]
        for name in (SST_DIR, LOG_DIR)
        if name in subdirs
    }
    return parse_rocksdb_store_files(store.files, listed.get(SST_DIR, ()), listed.get(LOG_DIR, ()))


def read_rocksdb_zip(storage: CheckpointStorage, path: str) -> RocksDBCheckpointMetadata:
    """Read the metadata of the zip at ``path`` (relative to the checkpoint root)."""
    return parse_rocksdb_zip(storage.read_bytes(path, max_bytes=MAX_ZIP_BYTES), source=path)


def read_changelog(
    storage: CheckpointStorage, path: str, *, codec: str | None, row_checksum: bool = False
) -> StateStoreChangelog:
    """Read and decode the changelog at ``path`` (relative to the checkpoint root)."""
    data = storage.read_bytes(path, max_bytes=MAX_STATE_FILE_BYTES)
    return parse_changelog(data, source=path, codec=codec, row_checksum=row_checksum)


def read_rocksdb_version(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    row_checksum: bool = False,
    unique_id: str | None = None,
) -> RocksDBVersionState:
    """Tell how ``version`` of a store loads and, where ckptweb can know it exactly, its row count.

    ``unique_id`` (format 2) comes from the commit log (state_unique_ids_by_version); without
    it, a format-2 version takes the only unique id its files carry.
    """
    files = list_rocksdb_store_files(storage, store)
    if unique_id is None and files.checkpoint_format == 2:
        unique_id = _unique_id_of(files, version, {}, store.path)
    return _StoreReader(storage, store.path, files, codec, row_checksum).state_of(version, unique_id)


def summarize_rocksdb_store(
    storage: CheckpointStorage,
    store: StateStoreDir,
    *,
    codec: str | None,
    row_checksum: bool = False,
    unique_ids: Mapping[int, str] | None = None,
) -> RocksDBStoreSummary:
    """Read every version of a RocksDB store; a file that fails is recorded and the rest still read.

    Format 2 versions use ``unique_ids`` (from the commit log) or, failing that, the only unique
    id their files carry.
    """
    files = list_rocksdb_store_files(storage, store)
    reader = _StoreReader(storage, store.path, files, codec, row_checksum)
    states, errors = _read_versions(reader, files, unique_ids or {}, store.path)
    referenced, zip_errors = reader.referenced_immutable_files()
    unreferenced = tuple(f.name for f in files.sst_files if f.name not in referenced)
    sizes = sum(f.size for f in store.files if not f.is_dir) + sum(f.size for f in files.sst_files + files.log_files)
    return RocksDBStoreSummary(
        store.operator,
        store.partition,
        store.store,
        store.path,
        files,
        tuple(states),
        unreferenced,
        sizes,
        tuple(dict.fromkeys(errors + zip_errors)),
    )


def _read_versions(
    reader: _StoreReader, files: RocksDBStoreFiles, unique_ids: Mapping[int, str], path: str
) -> tuple[list[RocksDBVersionState], list[str]]:
    """The state of every version that reads, and the error of each one that does not, in order."""
    states, errors = [], []
    for version in files.versions:
        try:
            states.append(reader.state_of(version, _unique_id_of(files, version, unique_ids, path)))
        except CheckpointError as error:
            errors.append(str(error))
    return states, errors


def _unique_id_of(files: RocksDBStoreFiles, version: int, unique_ids: Mapping[int, str], path: str) -> str | None:
    if version in unique_ids:
        return unique_ids[version]
    candidates = files.unique_ids_of(version)
    if len(candidates) > 1:
        reason = f"{len(candidates)} unique ids for version {version}: the commit log must name one"
        raise CheckpointError(f"{path}/{version}_*", reason)
    return candidates[0] if candidates else None


class _StoreReader:
    """Reads one store's zips and changelogs through storage, each file at most once."""

    def __init__(
        self, storage: CheckpointStorage, path: str, files: RocksDBStoreFiles, codec: str | None, row_checksum: bool
    ) -> None:
        self.storage, self.path, self.files = storage, path, files
        self.codec, self.row_checksum = codec, row_checksum
        self._metadata: dict[str, RocksDBCheckpointMetadata] = {}
        self._changelogs: dict[str, StateStoreChangelog] = {}
        self._keys_after: dict[str, frozenset[bytes]] = {}  # changelog name -> keys replayed from version 0

    def metadata(self, zip_file: RocksDBVersionFile) -> RocksDBCheckpointMetadata:
        if zip_file.name not in self._metadata:
            self._metadata[zip_file.name] = read_rocksdb_zip(self.storage, f"{self.path}/{zip_file.name}")
        return self._metadata[zip_file.name]

    def changelog(self, changelog: RocksDBVersionFile) -> StateStoreChangelog:
        if changelog.name not in self._changelogs:
            self._changelogs[changelog.name] = read_changelog(
                self.storage, f"{self.path}/{changelog.name}", codec=self.codec, row_checksum=self.row_checksum
            )
        return self._changelogs[changelog.name]

    def state_of(self, version: int, unique_id: str | None) -> RocksDBVersionState:
        lineage: tuple[LineageItem, ...] = ()
        own_changelog = self.files.find("changelog", version, unique_id) if unique_id else None
        if own_changelog and self.files.find("zip", version, unique_id) is None:
            lineage = self.changelog(own_changelog).lineage or ()
        chain = resolve_load_chain(self.files, version, unique_id=unique_id, lineage=lineage)
        missing = self._missing_immutable_files(chain.snapshot)
        return RocksDBVersionState(version, chain, missing, *self._count_rows(chain, missing))

    def _missing_immutable_files(self, snapshot: RocksDBVersionFile | None) -> tuple[str, ...]:
        """SSTs/ and logs/ files the zip lists that are absent or of another size than listed."""
        if snapshot is None:
            return ()
        metadata = self.metadata(snapshot)
        missing = []
        kinds = (
            (SST_DIR, metadata.sst_files, self.files.sst_files),
            (LOG_DIR, metadata.log_files, self.files.log_files),
        )
        for subdir, listed, present in kinds:
            sizes = {info.name: info.size for info in present}
            missing += [f"{subdir}/{f.dfs_file_name}" for f in listed if sizes.get(f.dfs_file_name) != f.size_bytes]
        return tuple(missing)

    def _count_rows(self, chain: RocksDBLoadChain, missing: tuple[str, ...]) -> tuple[int | None, str]:
        if not chain.is_loadable:
            return None, "cannot be loaded: " + "; ".join(chain.problems)
        if missing:
            return None, f"cannot be loaded: {chain.snapshot.name} lists {len(missing)} absent or resized SST/log files"
        if chain.snapshot is not None:
            return self._rows_of_zip(chain)
        keys = self._replay_keys(chain.changelogs)
        if keys is None:
            return None, "the changelogs have column families (v2/v4): ckptweb does not count rows per column family"
        return len(keys), f"replay of {len(chain.changelogs)} changelogs from version 0"

    def _rows_of_zip(self, chain: RocksDBLoadChain) -> tuple[int | None, str]:
        num_keys = self.metadata(chain.snapshot).num_keys
        if chain.changelogs:
            return None, (
                f"{chain.snapshot.name} + {plural(len(chain.changelogs), 'changelog')}: whether a put adds a key or "
                "overwrites one is only known from the SST files (rocksdbrows reads them)"
            )
        if num_keys < 0:
            return (
                None,
                f"{chain.snapshot.name} has numKeys {num_keys}: row tracking was off (rocksdbrows counts its keys)",
            )
        return num_keys, f"numKeys of {chain.snapshot.name}"

    def _replay_keys(self, changelogs: tuple[RocksDBVersionFile, ...]) -> set[bytes] | None:
        """The keys after replaying ``changelogs`` from the empty version 0, or None with column families."""
        start, keys = 0, set()
        for index in range(len(changelogs) - 1, -1, -1):
            if changelogs[index].name in self._keys_after:
                start, keys = index + 1, set(self._keys_after[changelogs[index].name])
                break
        for changelog_file in changelogs[start:]:
            changelog = self.changelog(changelog_file)
            if changelog.has_column_families:
                return None
            for record in changelog.records:
                (keys.discard if record.value is None else keys.add)(record.key)
            self._keys_after[changelog_file.name] = frozenset(keys)
        return keys

    def referenced_immutable_files(self) -> tuple[set[str], list[str]]:
        """The SST/log names listed by any zip of the store, and the errors of zips that failed."""
        names, errors = set(), []
        for zip_file in self.files.zips:
            try:
                metadata = self.metadata(zip_file)
            except CheckpointError as error:
                errors.append(str(error))
                continue
            names.update(f.dfs_file_name for f in metadata.sst_files + metadata.log_files)
        return names, errors
