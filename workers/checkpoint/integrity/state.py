"""Checks of the state stores: can every store rebuild the state version the restarted batch loads?

Codes: state-partition-missing, state-version-missing. Partitions are counted against the
``spark.sql.shuffle.partitions`` the latest offsets file persisted, except for operators Spark
runs on partition 0 alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from ..errors import MissingFileError
from ..inventory import join_path
from ..layout import OFFSETS_DIR
from ..offsets import OffsetSeq
from ..rocksdbfiles import RocksDBStoreFiles, parse_rocksdb_store_files
from ..rocksdbloadchain import resolve_load_chain
from ..singlepartition import runs_on_one_partition
from ..stateinventory import (
    STATE_DIR,
    StateStoreDir,
    detect_provider,
    files_for_version,
    list_state_store_dirs,
    parse_hdfs_state_files,
)
from .batchlogs import _missing_ranges
from .facts import CheckpointFacts
from .findings import Finding

SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"


def check_state(facts: CheckpointFacts) -> Iterator[Finding]:
    """Every state store must be able to rebuild the version the restarted batch loads."""
    version = restart_state_version(facts.offset_ids, facts.commit_ids)
    if version is None:
        return
    if version == 0:
        # Batch 0 starts from empty state, with or without directories: a restart loads nothing,
        # and while batch 0 runs its partitions' directories appear one task at a time.
        return
    stores = list_state_store_dirs(facts.listing)  # type: ignore[arg-type]
    yield from _missing_partitions(stores, _shuffle_partitions(facts), _one_partition_operators(facts))
    for store in stores:
        yield from _unloadable_version(store, version)


def restart_state_version(offset_ids: Sequence[int], commit_ids: Sequence[int]) -> int | None:
    """The state version a restart loads: batch N loads version N, and the restart runs the
    batch after the latest one when that is committed, else the latest one again."""
    if not offset_ids:
        return None
    latest = offset_ids[-1]
    return latest + 1 if commit_ids and commit_ids[-1] == latest else latest


def _one_partition_operators(facts: CheckpointFacts) -> set[int]:
    return {op.operator for op in facts.lone_partition_operators if runs_on_one_partition(op.metadata, op.schema)}


def _shuffle_partitions(facts: CheckpointFacts) -> int | None:
    """``spark.sql.shuffle.partitions`` as the latest offsets file persisted it (the state's partitions)."""
    offsets = facts.offset_ids
    value = facts.value_of(f"{OFFSETS_DIR}/{offsets[-1]}") if offsets else None
    conf = value.metadata.conf if isinstance(value, OffsetSeq) and value.metadata else {}
    number = conf.get(SHUFFLE_PARTITIONS_CONF, "")
    return int(number) if number.isdigit() else None


def _missing_partitions(
    stores: Sequence[StateStoreDir], shuffle_partitions: int | None, one_partition: set[int]
) -> Iterator[Finding]:
    """``one_partition``: operators Spark runs on partition 0 alone (a global limit or aggregation)."""
    if shuffle_partitions is None:
        return
    found: dict[int, set[int]] = {}
    for store in stores:
        found.setdefault(store.operator, set()).add(store.partition)
    for operator, present in found.items():
        partitions = 1 if operator in one_partition else shuffle_partitions
        # The end marker makes the walk report partitions missing after the last one found.
        for first, last in _missing_ranges([*sorted(p for p in present if p < partitions), partitions], 0):
            yield Finding(
                "error",
                "state-partition-missing",
                f"{STATE_DIR}/{operator}/{first}",
                f"operator {operator} has no directory for {_partition_range(first, last)} of {partitions}",
                f"Spark fails at restart: the task of partition {first} finds no state to load.",
            )


def _partition_range(first: int, last: int) -> str:
    return f"partition {first}" if first == last else f"partitions {first} to {last}"


def _unloadable_version(store: StateStoreDir, version: int) -> Iterator[Finding]:
    provider = detect_provider(store.files)
    if provider == "rocksdb":
        missing = _missing_rocksdb_file(store, version)
    elif provider in ("hdfs", "empty"):
        missing = _missing_hdfs_file(store, version)
    else:
        return  # names no provider writes: nothing to tell about loading
    if missing is not None:
        yield Finding(
            "error",
            "state-version-missing",
            missing.path,
            f"state version {version} cannot be rebuilt: {missing.reason}",
            f"Spark fails at restart: loading version {version} of this store fails "
            "(CANNOT_LOAD_STATE_STORE: the file does not exist).",
        )


def _missing_hdfs_file(store: StateStoreDir, version: int) -> MissingFileError | None:
    """HDFSBackedStateStoreProvider: the latest snapshot at or below the version, then every delta."""
    state_files, _ = parse_hdfs_state_files(store.files)
    try:
        files_for_version(state_files, version, source=store.path)
    except MissingFileError as exc:
        return exc
    return None


def _any_file_of_a_version(files: RocksDBStoreFiles) -> RocksDBStoreFiles:
    """Format 2's zips and changelogs without their unique ids, so that any file of a version counts."""
    return replace(
        files,
        zips=tuple(replace(f, unique_id=None) for f in files.zips),
        changelogs=tuple(replace(f, unique_id=None) for f in files.changelogs),
    )


def _missing_rocksdb_file(store: StateStoreDir, version: int) -> MissingFileError | None:
    """RocksDB: the newest ``N.zip`` at or below the version, then every changelog after it.

    Best effort for checkpoint format 2 (``N_<uuid>.*``): which file of a version a load follows
    depends on the commit log's unique ids and each changelog's lineage, which would mean
    decompressing changelogs; here any file of a version counts.
    """
    files = parse_rocksdb_store_files(store.files)
    if files.checkpoint_format == 2:
        files = _any_file_of_a_version(files)
    chain = resolve_load_chain(files, version)
    if chain.is_loadable:
        return None
    base = chain.snapshot.version if chain.snapshot else 0
    first_missing, _ = next(_missing_ranges(sorted({f.version for f in chain.changelogs}) + [version + 1], base + 1))
    return MissingFileError(
        join_path(store.path, f"{first_missing}.changelog"),
        f"{'; '.join(chain.problems)}: version {version} is rebuilt from "
        f"{chain.snapshot.name if chain.snapshot else 'version 0'} and every changelog after it",
    )
