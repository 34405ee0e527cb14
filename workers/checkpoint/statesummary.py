"""One overview of a checkpoint's state stores, whatever the provider.

For every ``state/<op>/<partition>[/<store>]`` directory: the provider, the newest version, the
last snapshot (an HDFS ``N.snapshot`` or a RocksDB ``N.zip``) and how many deltas or changelogs
a load replays on top of it — the figure that says how slow a restart will be — the bytes on
disk, and the rows at one version: the version a restart loads (latest committed batch + 1),
which is also what Spark's ``statestore`` source reads by default. Every figure is of that one
version: files a batch wrote before it was killed (no commit) are listed as uncommitted versions,
never counted as the latest version, in the delta chain or in the restart load.

Rows are counted exactly (HDFS: snapshot plus deltas replayed; RocksDB: a zip's ``numKeys``,
changelogs replayed from version 0, or a zip's SST files plus the changelogs after it) and only
when the files to read stay under ``max_read_bytes``; otherwise ``rows`` is None and ``note``
says why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .errors import CheckpointError
from .layout import COMMITS_DIR, OFFSETS_DIR
from .logdir import list_batch_ids, read_commit, read_offset_seq
from .rocksdbloadchain import state_unique_ids_by_version
from .rocksdbrows import read_rocksdb_rows
from .rocksdbstate import RocksDBStoreSummary, RocksDBVersionState, summarize_rocksdb_store
from .stateinventory import (
    DEFAULT_STORE_NAME,
    StateStoreDir,
    detect_provider,
    earliest_state_version,
    files_for_version,
    list_state_store_dirs,
    parse_hdfs_state_files,
    summarize_hdfs_store,
)
from .staterows import read_state_size
from .statevariables import (
    StateVariableFigures,
    count_state_variables,
    list_schema_files,
    read_schema_history,
    read_state_variables,
    user_rows,
    with_schema_history,
)
from .statevariabletotals import StoreVariableTotal, sum_state_variables

if TYPE_CHECKING:
    from .commits import CommitMetadata
    from .inventory import TreeListing
    from .storage.checkpointstorage import CheckpointStorage

CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
ROW_CHECKSUM_CONF = "spark.sql.streaming.stateStore.rowChecksum.enabled"
# Counting rows reads every file of a version's load chain: skip stores larger than this.
DEFAULT_MAX_READ_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class StateConf:
    """How a query's state files are written, from the SQL conf Spark pins in the offset log."""

    codec: str | None
    row_checksum: bool


def state_conf(conf: Mapping[str, str]) -> StateConf:
    """Absent keys take Spark's defaults: lz4, no row checksums."""
    return StateConf(conf.get(CODEC_CONF), conf.get(ROW_CHECKSUM_CONF, "false").lower() == "true")


@dataclass(frozen=True, slots=True)
class StatePartitionSummary:
    """One partition (and store) of one stateful operator."""

    operator: int
    partition: int
    store: str
    provider: str
    path: str
    latest_version: int | None
    snapshot_version: int | None
    delta_chain: int | None
    bytes_on_disk: int
    rows: int | None
    rows_version: int | None
    note: str = ""
    # What loading the newest version reads: the snapshot (or zip) and the deltas (or changelogs)
    # after it — the restart cost of this partition. None when the chain cannot be resolved.
    load_files: int | None = None
    load_bytes: int | None = None
    # Versions past ``rows_version``'s committed batch (files of a batch without a commit, which a
    # restart rewrites): not in latest_version, delta_chain or the load.
    uncommitted_versions: tuple[int, ...] = ()
    # A store with column families (transformWithState): each state variable's figures at
    # ``rows_version``; ``rows`` is then the keys of the user variables (Spark's numKeys).
    variables: tuple[StateVariableFigures, ...] = ()
    # The oldest version with a file on storage: Spark's maintenance deletes the versions before it.
    earliest_version: int | None = None


@dataclass(frozen=True, slots=True)
class StateStoreSummary:
    """One operator and store over all its partitions (``inspect_checkpoint --json``'s ``state``)."""

    operator: int
    store: str
    provider: str
    partitions: int
    latest_version: int | None
    rows: int | None
    bytes_on_disk: int
    max_delta_chain: int | None
    # The slowest partition's restart load: files and bytes of its snapshot + deltas.
    max_load_files: int | None = None
    max_load_bytes: int | None = None
    # Versions some partition holds past the committed one (a batch with no commit wrote them).
    uncommitted_versions: tuple[int, ...] = ()
    # A store with column families: each state variable over the partitions, at their rows_version.
    variables: tuple[StoreVariableTotal, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "store": self.store,
            "provider": self.provider,
            "partitions": self.partitions,
            "latest_version": self.latest_version,
            "rows": self.rows,
            "bytes_on_disk": self.bytes_on_disk,
            "max_delta_chain": self.max_delta_chain,
            "uncommitted_versions": list(self.uncommitted_versions),
            "variables": [variable.as_json() for variable in self.variables],
        }


def summarize_state(
    storage: CheckpointStorage,
    *,
    version: int | None,
    conf: StateConf,
    commits: Mapping[int, CommitMetadata] | None = None,
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    listing: TreeListing | None = None,
) -> list[StatePartitionSummary]:
    """Summarize every state store directory; rows are counted at ``version`` (None: not counted).

    ``commits`` (batch id -> commit) give the unique ids of RocksDB checkpoint format 2. A
    ``listing`` of the checkpoint taken just before saves listing the state directories again.
    """
    stores = list_state_store_dirs(listing or storage)  # type: ignore[arg-type]
    return summarize_state_stores(
        storage, stores, version=version, conf=conf, commits=commits, max_read_bytes=max_read_bytes
    )


def summarize_state_stores(
    storage: CheckpointStorage,
    stores: Iterable[StateStoreDir],
    *,
    version: int | None,
    conf: StateConf,
    commits: Mapping[int, CommitMetadata] | None = None,
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    committed_version: int | None = None,
) -> list[StatePartitionSummary]:
    """Summarize the given store directories (a share of them, when workers split the partitions).

    Rows are counted at ``version`` (None: not counted). The file figures are of the version the
    newest committed batch wrote: ``committed_version``, which defaults to ``version``.
    """
    committed = version if committed_version is None else committed_version
    summaries = []
    families = _ColumnFamilyStores(storage)
    for store in stores:
        provider = detect_provider(store.files)
        if provider == "rocksdb":
            summary = _rocksdb_partition(
                storage, store, version, committed, conf, commits or {}, max_read_bytes, families
            )
        else:
            summary = _hdfs_partition(storage, store, provider, version, committed, conf, max_read_bytes)
        summaries.append(replace(summary, earliest_version=earliest_state_version(store.files)))
    return summaries


def read_checkpoint_state(
    storage: CheckpointStorage, *, max_read_bytes: int = DEFAULT_MAX_READ_BYTES
) -> list[StatePartitionSummary]:
    """Summarize the state of a checkpoint at the version a restart loads.

    Reads the logs for what that needs: the newest offsets file (the pinned codec and row
    checksum setting) and the commit files (the newest committed batch, and the unique ids of
    RocksDB format 2). An unreadable log file only costs what it would have told.
    """
    offset_ids = list_batch_ids(storage, OFFSETS_DIR)
    commits = {}
    for batch_id in list_batch_ids(storage, COMMITS_DIR):
        with contextlib.suppress(CheckpointError):
            commits[batch_id] = read_commit(storage, batch_id)
    version = max(commits) + 1 if commits else None
    return summarize_state(
        storage,
        version=version,
        conf=latest_state_conf(storage, offset_ids),
        commits=commits,
        max_read_bytes=max_read_bytes,
    )


def latest_state_conf(storage: CheckpointStorage, offset_ids: Sequence[int]) -> StateConf:
    for batch_id in reversed(offset_ids):
        try:
            metadata = read_offset_seq(storage, batch_id).metadata
        except CheckpointError:
            continue
        return state_conf(metadata.conf if metadata else {})
    return state_conf({})


def summarize_stores(partitions: Iterable[StatePartitionSummary]) -> list[StateStoreSummary]:
    """Add partitions up per (operator, store); rows only when every partition's are known.

    Any objects with the attributes of StatePartitionSummary will do (the dashboard passes its
    stored rows).
    """
    groups: dict[tuple[int, str], list[StatePartitionSummary]] = {}
    for partition in partitions:
        groups.setdefault((partition.operator, partition.store), []).append(partition)
    return [_store_total(operator, store, parts) for (operator, store), parts in sorted(groups.items())]


def _store_total(operator: int, store: str, parts: Sequence[StatePartitionSummary]) -> StateStoreSummary:
    rows = [p.rows for p in parts]
    chains = [p.delta_chain for p in parts]
    versions = [p.latest_version for p in parts if p.latest_version is not None]
    return StateStoreSummary(
        operator=operator,
        store=store,
        provider=parts[0].provider,
        partitions=len(parts),
        latest_version=max(versions, default=None),
        rows=None if None in rows else sum(rows),  # type: ignore[arg-type]
        bytes_on_disk=sum(p.bytes_on_disk for p in parts),
        max_delta_chain=None if None in chains else max(chains, default=None),  # type: ignore[type-var]
        max_load_files=max((p.load_files for p in parts if p.load_files is not None), default=None),
        max_load_bytes=max((p.load_bytes for p in parts if p.load_bytes is not None), default=None),
        uncommitted_versions=tuple(sorted({v for p in parts for v in getattr(p, "uncommitted_versions", ())})),
        variables=tuple(sum_state_variables(parts)),
    )


def _hdfs_partition(
    storage: CheckpointStorage,
    store: StateStoreDir,
    provider: str,
    version: int | None,
    committed: int | None,
    conf: StateConf,
    max_read_bytes: int,
) -> StatePartitionSummary:
    summary = summarize_hdfs_store(store.files, committed_version=committed)
    rows, note = _hdfs_rows(storage, store, version, conf, max_read_bytes)
    load = _hdfs_load_chain(store, summary.latest_version)
    return StatePartitionSummary(
        operator=store.operator,
        partition=store.partition,
        store=store.store,
        provider="hdfs" if provider in ("hdfs", "empty") else provider,
        path=store.path,
        latest_version=summary.latest_version,
        snapshot_version=summary.last_snapshot_version,
        delta_chain=summary.deltas_since_snapshot,
        bytes_on_disk=summary.bytes_on_disk,
        rows=rows,
        rows_version=None if rows is None else version,
        note=note,
        load_files=None if load is None else len(load),
        load_bytes=None if load is None else sum(f.size for f in load),
        uncommitted_versions=summary.uncommitted_versions,
    )


def _hdfs_load_chain(store: StateStoreDir, latest: int | None) -> tuple | None:
    if not latest:
        return None
    try:
        return files_for_version(parse_hdfs_state_files(store.files)[0], latest, source=store.path)
    except CheckpointError:
        return None


def _hdfs_rows(
    storage: CheckpointStorage, store: StateStoreDir, version: int | None, conf: StateConf, max_read_bytes: int
) -> tuple[int | None, str]:
    if version is None:
        return None, "no committed batch"
    try:
        chain = files_for_version(parse_hdfs_state_files(store.files)[0], version, source=store.path) if version else ()
        to_read = sum(f.size for f in chain)
        if to_read > max_read_bytes:
            return None, f"not counted: version {version} needs {to_read} bytes of files (limit {max_read_bytes})"
        size = read_state_size(storage, store, version, codec=conf.codec, row_checksum=conf.row_checksum)
    except CheckpointError as exc:
        return None, str(exc)
    return size.rows, ""


def _rocksdb_partition(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int | None,
    committed_version: int | None,
    conf: StateConf,
    commits: Mapping[int, CommitMetadata],
    max_read_bytes: int,
    families: _ColumnFamilyStores,
) -> StatePartitionSummary:
    summary = summarize_rocksdb_store(
        storage, store, codec=conf.codec, row_checksum=conf.row_checksum, unique_ids=_rocksdb_unique_ids(store, commits)
    )
    at_version = _state_at(summary, version)
    if families.has(store):
        figures = _variable_rows(storage, store, at_version, version, conf, max_read_bytes)
    else:
        rows, note = _rocksdb_rows(storage, store, at_version, version, conf, summary.errors, max_read_bytes)
        figures = (rows, note, ())
    return _rocksdb_partition_summary(store, summary, version, committed_version, figures)


def _rocksdb_partition_summary(
    store: StateStoreDir,
    summary: RocksDBStoreSummary,
    version: int | None,
    committed_version: int | None,
    figures: tuple[int | None, str, tuple[StateVariableFigures, ...]],
) -> StatePartitionSummary:
    """A RocksDB store's partition: its ``summary`` and the rows, note and variables of ``version``."""
    rows, note, variables = figures
    committed = _committed_states(summary, committed_version)
    return StatePartitionSummary(
        operator=store.operator,
        partition=store.partition,
        store=store.store,
        provider="rocksdb",
        path=store.path,
        bytes_on_disk=summary.bytes_on_disk,
        rows=rows,
        rows_version=None if rows is None else version,
        note=note,
        uncommitted_versions=tuple(state.version for state in summary.versions[len(committed) :]),
        variables=variables,
        **_rocksdb_latest_load(committed[-1] if committed else None),
    )


def _state_at(summary: RocksDBStoreSummary, version: int | None) -> RocksDBVersionState | None:
    return next((state for state in summary.versions if state.version == version), None)


def _committed_states(summary: RocksDBStoreSummary, committed_version: int | None) -> list[RocksDBVersionState]:
    """The store's versions up to ``committed_version`` (all when None), in order."""
    return [s for s in summary.versions if committed_version is None or s.version <= committed_version]


class _ColumnFamilyStores:
    """Which (operator, store) are transformWithState stores: those with state schema v3 files.
    One LIST per operator and store, however many partitions it has."""

    def __init__(self, storage: CheckpointStorage) -> None:
        self._storage = storage
        self._known: dict[tuple[int, str], bool] = {}

    def has(self, store: StateStoreDir) -> bool:
        key = (store.operator, store.store)
        if key not in self._known:
            self._known[key] = bool(list_schema_files(self._storage, store.operator, store.store))
        return self._known[key]


def _variable_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    at_version: RocksDBVersionState | None,
    version: int | None,
    conf: StateConf,
    max_read_bytes: int,
) -> tuple[int | None, str, tuple[StateVariableFigures, ...]]:
    """Rows, note and per-variable figures at ``version`` of a store with column families."""
    if at_version is None or not at_version.is_loadable:
        rows, note = _rocksdb_rows(storage, store, at_version, version, conf, (), max_read_bytes)
        return rows, note, ()
    try:
        variables = read_state_variables(storage, store.operator, store.store)
        figures = count_state_variables(
            storage,
            store,
            at_version.version,
            variables,
            codec=conf.codec,
            unique_id=at_version.chain.unique_id,
            max_read_bytes=max_read_bytes,
        )
        figures = with_schema_history(figures, read_schema_history(storage, store.operator, store.store))
    except CheckpointError as exc:
        return None, str(exc), ()
    return user_rows(figures), "", figures


def _rocksdb_unique_ids(store: StateStoreDir, commits: Mapping[int, CommitMetadata]) -> dict[int, str] | None:
    """The store's unique ids by version from the commit log, or None to use those its files carry."""
    # The commit log lists each partition's store ids in store order; only the default store's
    # place (0) is certain, so named stores of format 2 fall back to the ids their files carry.
    if store.store != DEFAULT_STORE_NAME:
        return None
    return state_unique_ids_by_version(commits, operator=store.operator, partition=store.partition)


def _rocksdb_latest_load(latest: RocksDBVersionState | None) -> dict[str, int | None]:
    """The summary's fields of the newest committed version: its zip, its changelogs, what loading it reads."""
    if latest is None:
        return dict.fromkeys(("latest_version", "snapshot_version", "delta_chain", "load_files", "load_bytes"))
    chain = latest.chain
    return {
        "latest_version": latest.version,
        "snapshot_version": None if chain.snapshot is None else chain.snapshot.version,
        "delta_chain": len(chain.changelogs),
        "load_files": len(chain.changelogs) + (chain.snapshot is not None),
        "load_bytes": sum(f.size for f in (chain.snapshot, *chain.changelogs) if f is not None),
    }


def _rocksdb_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    at_version: RocksDBVersionState | None,
    version: int | None,
    conf: StateConf,
    errors: Sequence[str],
    max_read_bytes: int,
) -> tuple[int | None, str]:
    """The rows at ``version``: the summary's cheap count, else the SST files read (rocksdbrows)."""
    if at_version is None:
        return (
            None,
            f"version {version} is not among the store's files" if version is not None else "no committed batch",
        )
    if at_version.num_rows is not None:
        return at_version.num_rows, "; ".join(errors)
    if not at_version.is_loadable:
        return None, at_version.num_rows_source
    try:
        count = read_rocksdb_rows(
            storage,
            store,
            at_version.version,
            codec=conf.codec,
            unique_id=at_version.chain.unique_id,
            max_read_bytes=max_read_bytes,
        )
    except CheckpointError as exc:
        return None, str(exc)
    return count.rows, "; ".join(errors)
