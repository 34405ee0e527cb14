"""Snapshot state: write ``V.snapshot`` for stores with long delta chains, as Spark's doSnapshot does.

HDFSBackedStateStoreProvider loads version V from the latest snapshot at or below V plus every
delta after it, so a restart after a long run of deltas replays them all. Spark's maintenance
thread writes a snapshot of the latest version when more than ``minDeltasForSnapshot`` (10)
deltas follow the last one, but only for versions it holds in memory, so a query that restarts
often or stops early keeps its long chain. This action writes that snapshot offline:

* the content is the state at V, replayed from the files of files_for_version(V) (snapshot
  first, then deltas; a removal drops the key), one store in memory at a time;
* the file is Spark's snapshot format (writeSnapshotFile): per row int32 key size, key, int32
  value size, value, then int32 -1, compressed with the codec the offset log pins
  (``spark.sql.streaming.stateStore.compression.codec``; lz4 -> lz4-java's LZ4Block stream with
  32 KiB blocks, zstd -> a standard zstd frame). Keys and values are copied byte for byte, so a
  4.1+ row checksum (4 bytes before the value row) survives, and nothing is floored;
* only versions written by committed batches: version V is written by batch V - 1, and a batch
  without a commit runs again on restart and may write its version differently.

The snapshot shadows nothing Spark needs: the deltas stay until cleanup removes them.
"""

from __future__ import annotations

import functools
import posixpath
import struct
from collections.abc import Collection, Iterator, Sequence
from functools import lru_cache
from itertools import chain

import zstandard

from ..errors import MissingFileError, UnsupportedCodecError
from ..lz4block import compress_lz4_block_stream
from ..statecodec import MAX_STATE_FILE_BYTES, decompress_state_file, normalize_codec_name
from ..statefiles import RecordRun, find_record_run, iter_run_keys
from ..stateinventory import HdfsStateFile, StateStoreDir, detect_provider, files_for_version, parse_hdfs_state_files
from ..statesummary import StateConf
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size, plural
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import FileState, MaintenancePlan, PlannedWrite, Precondition, precondition
from .planning import PlanStart, join, precondition_unless, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc
from .statestores import (
    NO_STATE_STORE,
    StateListings,
    committed_state_version,
    list_state_listings,
    providers_supported,
    read_state_conf,
    stores_exist,
    stores_parameter,
    survey_stores,
    version_committed,
)

ACTION = "snapshot"
# spark.sql.streaming.stateStore.minDeltasForSnapshot: a snapshot is due after more deltas than this.
DEFAULT_MIN_CHAIN = 10
SUPPORTED_CODECS = ("lz4", "zstd")
# spark.io.compression.zstd.level
ZSTD_LEVEL = 1
_SIZE = struct.Struct(">i")
_END_OF_FILE = _SIZE.pack(-1)
# Puts cut per struct call in a run of equal-size records.
RECORDS_PER_UNPACK = 64


def plan_snapshot(
    storage: CheckpointStorage,
    *,
    now: float,
    min_chain: int = DEFAULT_MIN_CHAIN,
    stores: Collection[str] | None = None,
    version: int | None = None,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """List the logs and ``state/``, read the pinned state conf, and plan (see snapshot_plan_from_listings)."""
    listings = list_state_listings(storage)
    conf = read_state_conf(storage, listings.offset_ids)
    return snapshot_plan_from_listings(
        listings, conf, now=now, min_chain=min_chain, stores=stores, version=version, quiet_seconds=quiet_seconds
    )


def snapshot_plan_from_listings(
    listings: StateListings,
    conf: StateConf,
    *,
    now: float,
    min_chain: int = DEFAULT_MIN_CHAIN,
    stores: Collection[str] | None = None,
    version: int | None = None,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """Plan one ``V.snapshot`` per store whose chain at V has more than ``min_chain`` deltas.

    ``stores`` limits the action to these store paths (``state/<op>/<part>[/<store>]``);
    ``version`` is V (default: per store, its newest version a committed batch wrote).
    """
    if min_chain < 0:
        raise ValueError(f"min_chain must be >= 0, not {min_chain}")
    parameters = {"min_chain": min_chain, "stores": stores_parameter(stores), "version": version}
    start = start_plan(ACTION, parameters, listings.offsets, listings.commits, now=now, quiet_seconds=quiet_seconds)
    return _survey_and_finish(start, listings, conf, stores)


def _survey_and_finish(
    start: PlanStart, listings: StateListings, conf: StateConf, stores: Collection[str] | None
) -> MaintenancePlan:
    """Survey the chosen ``stores`` (all when None) and turn what it found into the plan."""
    min_chain = start.parameters["min_chain"]
    committed = committed_state_version(listings.commit_ids)
    survey = _Survey(committed, start.parameters["version"], min_chain)
    chosen, unknown = survey_stores(listings.stores, stores, survey.add)
    return start.finish(
        writes=survey.writes,
        preconditions=_preconditions(survey, unknown, conf),
        summary=_summary(survey, min_chain, stores_chosen=len(chosen), committed=committed),
        notes=survey.notes,
    )


def _preconditions(survey: _Survey, unknown: Sequence[str], conf: StateConf) -> tuple[Precondition, ...]:
    """The plan's own preconditions, after the ``survey`` of the stores (``unknown``: stores asked for but absent)."""
    return (
        _committed_precondition(survey.committed, survey.version),
        stores_exist(unknown),
        _provider_precondition(survey.rocksdb),
        _codec_precondition(conf),
        precondition_unless("inputs-complete", survey.broken, "every chain to replay is complete"),
        precondition_unless("no-stale-checksum", survey.stale, "no checksum sidecar waits for a snapshot"),
    )


class _Survey:
    """The stores looked at: the snapshots to write and every reason a store was left out."""

    def __init__(self, committed: int | None, version: int | None, min_chain: int) -> None:
        # The newest version a committed batch wrote, the version asked for, the longest chain left alone.
        self.committed, self.version, self.min_chain = committed, version, min_chain
        self.writes: list[PlannedWrite] = []
        self.notes: list[str] = []
        self.rocksdb: list[str] = []
        self.broken: list[str] = []
        self.stale: list[str] = []
        # (deltas replayed at the target version, store path, version) of every HDFS store measured.
        self.chains: list[tuple[int, str, int]] = []

    def add(self, store: StateStoreDir) -> None:
        chain = self._chain_at_target(store)
        if chain is None:
            return
        files, target = chain
        deltas = [f for f in files if not f.is_snapshot]
        self.chains.append((0 if files[0].version == target else len(deltas), store.path, target))
        if files[0].version == target:
            self.notes.append(f"{store.path}: version {target} already has a snapshot")
            return
        if len(deltas) <= self.min_chain:
            self.notes.append(
                f"{store.path}: version {target} replays {len(deltas)} deltas (not more than {self.min_chain})"
            )
            return
        self._plan_write(store, files, target, len(deltas))

    def _chain_at_target(self, store: StateStoreDir) -> tuple[tuple[HdfsStateFile, ...], int] | None:
        """The files a load of ``store``'s target version replays, and that version; None (with the reason
        recorded) for a RocksDB store, a store without a committed version, or a broken chain."""
        provider = detect_provider(store.files)
        if provider == "rocksdb":
            self.rocksdb.append(store.path)
            return None
        state_files, _ = parse_hdfs_state_files(store.files)
        target = _target_version([f.version for f in state_files], self.committed, self.version)
        if provider != "hdfs" or target is None:
            self.notes.append(f"{store.path}: no state version written by a committed batch")
            return None
        try:
            files = files_for_version(state_files, target, source=store.path)
        except MissingFileError as exc:
            self.broken.append(str(exc))
            return None
        return files, target

    def _plan_write(self, store: StateStoreDir, files: Sequence[HdfsStateFile], target: int, deltas: int) -> None:
        names = {info.name for info in store.files}
        name = f"{target}.snapshot"
        if f"{name}.crc" in names:
            self.stale.append(
                f"{join(store.path, name)}.crc: an orphan checksum sidecar; "
                "Spark would check the new snapshot against it, delete it first"
            )
            return
        base = f"snapshot {files[0].version}" if files[0].is_snapshot else "version 0"
        self.writes.append(
            PlannedWrite(
                path=join(store.path, name),
                inputs=tuple(FileState(join(store.path, f.name), f.size) for f in files),
                estimated_bytes=sum(f.size for f in files),
                reason=f"version {target} replays {deltas} deltas after {base}; the snapshot lets a load skip them",
                hadoop_crc=directory_uses_hadoop_crc(names),
            )
        )


def _target_version(versions: Sequence[int], committed: int | None, version: int | None) -> int | None:
    """The version to snapshot: the one asked for, else the newest one a committed batch wrote."""
    if committed is None:
        return None
    if version is not None:
        return version if version <= committed else None
    eligible = [v for v in versions if v <= committed]
    return eligible[-1] if eligible else None


def _committed_precondition(committed: int | None, version: int | None) -> Precondition:
    uncommitted = version is not None and committed is not None and not 0 < version <= committed
    return version_committed(
        committed,
        none_committed="there is no state version to snapshot",
        final=f"versions up to {committed} are final",
        problem=(
            f"version {version} is not one a committed batch wrote (1 to {committed}): "
            "a batch without a commit runs again on restart"
        )
        if uncommitted
        else None,
    )


def _provider_precondition(rocksdb: Sequence[str]) -> Precondition:
    return providers_supported(
        "hdfs-provider",
        rocksdb,
        "RocksDB snapshots are written by Spark's RocksDB provider; not supported",
        "every chosen store is HDFSBackedStateStoreProvider's",
    )


def _codec_precondition(conf: StateConf) -> Precondition:
    name = normalize_codec_name(conf.codec)
    if name in SUPPORTED_CODECS:
        return precondition("codec", True, f"state files are compressed with {name}")
    return precondition(
        "codec",
        False,
        f"spark.sql.streaming.stateStore.compression.codec is {conf.codec!r}: "
        "ckptweb writes only lz4 and zstd state files",
    )


def _summary(survey: _Survey, min_chain: int, *, stores_chosen: int, committed: int | None) -> str:
    writes = survey.writes
    if writes:
        total = sum(len(w.inputs) for w in writes)
        read = sum(w.estimated_bytes for w in writes)
        return (
            f"write {plural(len(writes), 'snapshot')} replacing the replay of {plural(total, 'file')} "
            f"(about {format_size(read)} read)"
        )
    if not stores_chosen:
        return NO_STATE_STORE
    if committed is None:
        return "nothing to do: no batch is committed, so no state version is final"
    if len(survey.rocksdb) == stores_chosen:
        return "nothing to do: every store is RocksDB's, whose snapshots Spark's RocksDB provider writes"
    if not survey.chains:
        if survey.broken:
            return "nothing to do: the delta chains to replay are incomplete (see inputs-complete)"
        return "nothing to do: no store has a version written by a committed batch"
    return explain_no_snapshot(*max(survey.chains), min_chain=min_chain)


def explain_no_snapshot(longest: int, path: str, version: int, *, min_chain: int) -> str:
    """Say why no store gets a snapshot when the longest delta chain is ``longest`` (store ``path``),
    and which longest chain allowed (``min_chain``, the form's "Longest delta chain allowed") would write one."""
    if longest == 0:
        return "nothing to do: every store already has a snapshot at its newest committed version"
    change = f"; allowing {longest - 1} or fewer would snapshot it" if longest > 1 else ""
    return (
        f"nothing to do: the longest delta chain is {plural(longest, 'delta')} ({path} at version {version}), "
        f"not more than the {min_chain} allowed{change}"
    )


def build_snapshot_content(storage: CheckpointStorage, write: PlannedWrite, *, conf: StateConf | None = None) -> bytes:
    """Replay ``write.inputs`` (snapshot first, then deltas) and return the compressed snapshot.

    ``conf`` is the pinned state conf (read from the newest offsets file when None).
    """
    if conf is None:
        conf = read_state_conf(storage)
    state: dict[bytes, bytes] = {}
    for state_file in write.inputs:
        raw = decompress_state_file(
            storage.read_bytes(state_file.path, max_bytes=MAX_STATE_FILE_BYTES),
            source=state_file.path,
            codec=conf.codec,
        )
        replay_records(
            raw,
            state,
            source=state_file.path,
            is_snapshot=_is_snapshot(state_file.path),
            row_checksum=conf.row_checksum,
        )
    return compress_state_content(encode_snapshot(state), codec=conf.codec, source=write.path)


def _is_snapshot(path: str) -> bool:
    return posixpath.basename(path).lower().endswith(".snapshot")


def replay_records(
    raw: bytes, state: dict[bytes, bytes], *, source: str, is_snapshot: bool, row_checksum: bool
) -> None:
    """Apply the records of one decompressed state file to ``state`` (key -> value as stored).

    Values keep their exact bytes (row checksum prefix, unfloored length). With row checksums a
    removal's key carries a 4-byte checksum before the key row (Spark's writeRemoveToDeltaFile);
    it is dropped to find the key. The file is read as runs of records with equal sizes
    (statefiles.find_record_run, whose first record gets every check of the record reader), each
    cut by struct: no bytecode runs per record of a fixed-width run.
    """
    pos = 0
    while (
        run := find_record_run(raw, pos, source=source, row_checksum=row_checksum, removals_allowed=not is_snapshot)
    ) is not None:
        if run.is_removal:
            for key in iter_run_keys(raw, run, row_checksum=row_checksum):
                state.pop(key, None)
        else:
            pairs = iter(_iter_run_fields(raw, run))
            state.update(zip(pairs, pairs, strict=False))
        pos = run.end


def _iter_run_fields(raw: bytes, run: RecordRun) -> Iterator[bytes]:
    """Key, value, key, value... of a run of puts, exactly as stored."""
    stride = run.stride
    whole = run.count - run.count % RECORDS_PER_UNPACK
    tail_at = run.start + whole * stride
    chunks = (
        _put_layout(run.key_size, run.value_size, RECORDS_PER_UNPACK).iter_unpack(memoryview(raw)[run.start : tail_at])
        if whole
        else ()
    )
    tail = (
        _put_layout(run.key_size, run.value_size, run.count - whole).unpack_from(raw, tail_at)
        if run.count > whole
        else ()
    )
    return chain(chain.from_iterable(chunks), tail)


@lru_cache(maxsize=1024)
def _put_layout(key_size: int, value_size: int, records: int) -> struct.Struct:
    """A struct that cuts key and value out of each of ``records`` consecutive puts."""
    return struct.Struct("=" + f"4x{key_size}s4x{value_size}s" * records)


def encode_snapshot(state: dict[bytes, bytes]) -> bytes:
    """Frame ``state`` as writeSnapshotFile does: (size, key, size, value) per row, then -1."""
    parts = []
    for key, value in state.items():
        parts.extend((_SIZE.pack(len(key)), key, _SIZE.pack(len(value)), value))
    parts.append(_END_OF_FILE)
    return b"".join(parts)


def compress_state_content(raw: bytes, *, codec: str | None, source: str) -> bytes:
    """Compress a state file's content the way Spark's codec ``codec`` does (lz4 or zstd)."""
    name = normalize_codec_name(codec)
    if name == "lz4":
        return compress_lz4_block_stream(raw)
    if name == "zstd":
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(raw)
    raise UnsupportedCodecError(source, codec=codec or "")


def apply_snapshot(
    storage: CheckpointStorage, plan: MaintenancePlan, *, on_step: StepHook | None = None
) -> AppliedPlan:
    """Write the snapshots of a confirmed plan (each to a temporary name, renamed when complete)."""
    if plan.action != ACTION:
        raise ValueError(f"not a snapshot plan: {plan.action!r}")
    conf = read_state_conf(storage) if plan.writes else StateConf(None, False)
    if plan.writes and normalize_codec_name(conf.codec) not in SUPPORTED_CODECS:
        raise UnsupportedCodecError(plan.writes[0].path, codec=conf.codec or "")
    return apply_plan(storage, plan, functools.partial(build_snapshot_content, conf=conf), on_step=on_step)


__all__ = [
    "DEFAULT_MIN_CHAIN",
    "apply_snapshot",
    "build_snapshot_content",
    "compress_state_content",
    "encode_snapshot",
    "explain_no_snapshot",
    "plan_snapshot",
    "snapshot_plan_from_listings",
    "replay_records",
]
