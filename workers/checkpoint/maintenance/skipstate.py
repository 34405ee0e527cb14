"""Skip: the state a skipped batch carries forward, store by store (an HDFS store's empty delta and
rewritten snapshot, a RocksDB store's empty changelog or copied zip), and what the stores must be
for that. skip.py's docstring says what is written and why.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..errors import CheckpointError
from ..rocksdbfiles import RocksDBStoreFiles, parse_rocksdb_store_files
from ..rocksdbloadchain import resolve_load_chain
from ..statecodec import normalize_codec_name
from ..stateinventory import (
    HdfsStateFile,
    StateStoreDir,
    detect_provider,
    files_for_version,
    parse_hdfs_state_files,
)
from ..statesummary import StateConf
from .plan import FileState, PlannedWrite, Precondition, precondition
from .planning import join, precondition_unless
from .sidecars import directory_uses_hadoop_crc
from .skipsurvey import SHUFFLE_PARTITIONS_CONF, SkipSurvey
from .snapshot import SUPPORTED_CODECS
from .statestores import StateListings

_FORMAT_2_REFUSAL = (
    "{path} uses checkpoint format 2 (state unique ids): the commit of batch {batch} would have to "
    "name the unique id of a version Spark never wrote; skip is not supported for this format"
)


_NO_STATE_AT_BATCH_0 = (
    "batch 0 wrote no state, so the checkpoint cannot tell whether the query keeps state: if it does, "
    "Spark would fail to load state version 1 after the skip"
)


def survey_state(survey: SkipSurvey, listings: StateListings) -> None:
    stores = listings.stores
    for store in stores:
        survey.stores += 1
        provider = detect_provider(store.files)
        if provider == "rocksdb":
            _carry_rocksdb(survey, store)
        else:
            _carry_hdfs(survey, store)
    survey.preconditions.extend(_state_preconditions(survey, stores))


def _state_preconditions(survey: SkipSurvey, stores: Sequence[StateStoreDir]) -> tuple[Precondition, ...]:
    """Whether every store's state is carried forward, exists in every partition, and has a codec we write."""
    carried = (
        f"version {survey.batch + 1} of every store can be made equal to version {survey.batch}"
        if stores
        else "the query keeps no state"
    )
    return (
        precondition_unless("state-carried", survey.refused, carried),
        _partitions_complete(stores, survey.partitions, survey.batch),
        _codec_supported(survey.conf, bool(stores)),
    )


def _carry_hdfs(survey: SkipSurvey, store: StateStoreDir) -> None:
    """``N+1.delta`` without records; a stale ``N+1.snapshot`` rewritten with version N's rows."""
    batch, names = survey.batch, {info.name for info in store.files}
    state_files, _ = parse_hdfs_state_files(store.files)
    later = sorted({f.version for f in state_files if f.version > batch + 1})
    if later:
        survey.refused.append(
            f"{store.path} has state versions after {batch + 1} ({later[0]}…): written by "
            "batches that never committed; rewind or clean them up first"
        )
        return
    chain = _hdfs_chain(survey, store, state_files)
    if chain is None:
        return
    crc = directory_uses_hadoop_crc(names)
    survey.writes.append(_state_write(store, f"{batch + 1}.delta", (), names, crc, "a delta without records"))
    if f"{batch + 1}.snapshot" in names:
        survey.writes.append(_stale_snapshot_write(store, batch, chain, names, crc))


def _stale_snapshot_write(
    store: StateStoreDir, batch: int, chain: Sequence[HdfsStateFile], names: Collection[str], crc: bool
) -> PlannedWrite:
    """``N+1.snapshot`` rewritten with the rows of version N, which the files of ``chain`` load."""
    inputs = tuple(FileState(join(store.path, f.name), f.size) for f in chain)
    why = f"the rows of version {batch}, replacing the snapshot the failed run's maintenance wrote"
    return _state_write(store, f"{batch + 1}.snapshot", inputs, names, crc, why)


def _hdfs_chain(survey: SkipSurvey, store: StateStoreDir, state_files: Sequence[HdfsStateFile]):
    """The files that load version N (() for version 0, the empty state); None when it does not load."""
    if survey.batch == 0:
        return ()
    try:
        return files_for_version([f for f in state_files if f.version <= survey.batch], survey.batch, source=store.path)
    except CheckpointError as exc:
        survey.refused.append(f"version {survey.batch} does not load: {exc}")
        return None


def _carry_rocksdb(survey: SkipSurvey, store: StateStoreDir) -> None:
    """Empty ``N+1.changelog`` (changelog checkpointing) or ``N+1.zip`` copied from ``N.zip``."""
    batch, names = survey.batch, {info.name for info in store.files}
    files = parse_rocksdb_store_files(store.files)
    if files.checkpoint_format == 2:
        survey.refused.append(_FORMAT_2_REFUSAL.format(path=store.path, batch=batch))
        return
    later = [v for v in files.versions if v > batch + 1]
    if later:
        survey.refused.append(f"{store.path} has state versions after {batch + 1} ({later[0]}…); rewind first")
        return
    crc = directory_uses_hadoop_crc(names)
    if files.changelogs:
        _carry_rocksdb_changelog(survey, store, files, names, crc)
    else:
        _carry_rocksdb_zip(survey, store, files, names, crc, "version N + 1 loads from its own zip")


def _carry_rocksdb_changelog(
    survey: SkipSurvey, store: StateStoreDir, files: RocksDBStoreFiles, names: Collection[str], crc: bool
) -> None:
    batch = survey.batch
    chain = resolve_load_chain(files, batch) if batch > 0 else None
    if chain is not None and not chain.is_loadable:
        survey.refused.append(f"{store.path}: version {batch} does not load ({'; '.join(chain.problems)})")
        return
    survey.writes.append(
        _state_write(store, f"{batch + 1}.changelog", (), names, crc, "a changelog without records (format v1)")
    )
    if files.find("zip", batch + 1, None) is not None:
        _carry_rocksdb_zip(survey, store, files, names, crc, "the zip the failed run uploaded would shadow it")


def _carry_rocksdb_zip(
    survey: SkipSurvey, store: StateStoreDir, files: RocksDBStoreFiles, names: Collection[str], crc: bool, why: str
) -> None:
    batch = survey.batch
    source = files.find("zip", batch, None)
    if source is None:
        survey.refused.append(
            f"{store.path}: version {batch + 1} must be a copy of {batch}.zip ({why}), which does not exist"
        )
        return
    inputs = (FileState(join(store.path, source.name), source.size),)
    survey.writes.append(_state_write(store, f"{batch + 1}.zip", inputs, names, crc, f"a copy of {source.name}"))
    survey.notes.append(
        f"{join(store.path, f'{batch + 1}.zip')}: a copy of {source.name}; it lists the same SST files, so none is "
        "copied. SST files a failed run uploaded for it are no longer referenced (cleanup removes them)"
    )


def _state_write(
    store: StateStoreDir, name: str, inputs: tuple[FileState, ...], names: Collection[str], crc: bool, what: str
) -> PlannedWrite:
    version = int(name.split(".", 1)[0])
    exists = name in names
    return PlannedWrite(
        path=join(store.path, name),
        inputs=inputs,
        estimated_bytes=sum(i.size for i in inputs) or 32,
        reason=f"state version {version} equal to version {version - 1}: {what}"
        + (" (overwrites the file the failed run wrote)" if exists else ""),
        overwrite=exists,
        hadoop_crc=crc,
    )


def _partitions_complete(stores: Sequence[StateStoreDir], partitions: int | None, batch: int) -> Precondition:
    """ "stores-complete": every operator's store exists in every shuffle partition (else Spark would find
    no version N + 1 where the skip wrote none)."""
    if not stores:
        if batch == 0:
            return precondition("stores-complete", False, _NO_STATE_AT_BATCH_0)
        return precondition("stores-complete", True, "no state store")
    if partitions is None:
        return precondition("stores-complete", False, f"offsets/{batch} does not pin {SHUFFLE_PARTITIONS_CONF}")
    missing = _missing_stores(stores, partitions)
    return precondition_unless(
        "stores-complete", missing, f"every store exists in all {partitions} partitions", prefix="missing store: "
    )


def _missing_stores(stores: Sequence[StateStoreDir], partitions: int) -> list[str]:
    """Per operator's store missing from some of the ``partitions``: the first partition it misses."""
    present: dict[tuple[int, str], set[int]] = {}
    for store in stores:
        present.setdefault((store.operator, store.store), set()).add(store.partition)
    return [
        f"state/{operator}/{sorted(set(range(partitions)) - seen)[0]} ({name})"
        for (operator, name), seen in sorted(present.items())
        if seen != set(range(partitions))
    ]


def _codec_supported(conf: StateConf, has_state: bool) -> Precondition:
    name = normalize_codec_name(conf.codec)
    if not has_state or name in SUPPORTED_CODECS:
        return precondition("codec", True, f"state files are written with {name}")
    return precondition("codec", False, f"state codec {conf.codec!r}: ckptweb writes only lz4 and zstd state files")
