"""Skip: mark an uncommitted batch done without running it, its state carried forward unchanged.

A batch that fails at every restart (a poison record, a UDF that throws on one row) is the
latest batch of the offset log without a commit: Spark runs it again at each restart with the
offsets of ``offsets/N``, from the end offsets of ``offsets/N-1``. Skipping it writes what a
successful run of a batch that read nothing would have left, so that Spark finds batch N
committed and plans batch N + 1 from the end offsets of ``offsets/N``: the records of batch N
are never processed.

What is written (batch N reads state version N and writes version N + 1):

* every HDFS-backed store: ``N+1.delta`` holding no record (the codec's stream of the int32 -1
  end mark, as HDFSBackedStateStoreProvider writes for a commit without changes), so version
  N + 1 loads as version N. A ``N+1.snapshot`` left by the failed run (Spark's maintenance may
  snapshot the newest version it holds) is rewritten with the rows of version N, since a
  snapshot shadows the delta of its version;
* every RocksDB store (checkpoint format 1): with changelog checkpointing (the store has
  changelogs) an empty ``N+1.changelog`` (format v1, the same bytes as an empty delta), and a
  ``N+1.zip`` the failed run uploaded is replaced by a copy of ``N.zip``; without changelogs a
  copy of ``N.zip`` as ``N+1.zip``: a zip names its SST files and carries no version, so the
  copy loads as version N. Checkpoint format 2 (unique ids in the commit log) is refused: the
  next commit would have to name ids of files Spark has not written;
* last, ``commits/N`` as CommitLog writes it (v1), its watermark carried from ``commits/N-1``
  (a batch that read nothing does not move the watermark). Writes go in plan order, so a run
  killed before the commit leaves a batch that is still uncommitted (Spark rewrites its state
  files when it runs it), and one killed after it leaves the skip complete.

Files a file source logged for batch N (``sources/<i>/<L>``) stay: FileStreamSource has seen
them and never reads them again. A file sink writes nothing for batch N (its ``_spark_metadata``
gets no entry for N; data files a failed task left are not in the log, so no reader sees them).
"""

from __future__ import annotations

import dataclasses
import functools
import posixpath
import struct
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..compactible import FileEntry, is_compaction_batch
from ..errors import CheckpointError
from ..layout import COMMITS_DIR, COMPACT_FILE_SUFFIX, OFFSETS_DIR
from ..logdir import read_commit, read_offset_seq
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, log_batch_files, log_compact_interval, sink_log_location
from ..offsets import SERIALIZED_VOID_OFFSET, OffsetSeq
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
from ..statesummary import StateConf, state_conf
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import plural
from .compaction import build_compaction_content, compaction_input_names
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import FileState, MaintenancePlan, PlannedWrite, Precondition, precondition
from .planning import PlanStart, join, precondition_unless, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc
from .skipoffsets import (
    SkipRefused,
    describe_source_range,
    file_log_offset,
    kafka_json,
    kafka_skip_offsets,
    rewrite_offset_lines,
    same_file,
    source_log_bytes,
    source_log_file,
    source_log_lines,
    with_batch_id,
)
from .snapshot import SUPPORTED_CODECS, build_snapshot_content, compress_state_content
from .statestores import StateListings, list_state_listings

ACTION = "skip"
# Marks a plan path in the file sink's storage (outside the checkpoint), relative to the sink's root:
# the convention of the rewind branch's execute.SINK_PATH_PREFIX, so that one apply_plan with the sink
# storage can carry the whole plan once both are merged.
SINK_PREFIX = "@sink/"
# A compactible log file without entries: what FileStreamSink logs for a batch that wrote no file.
COMPACTIBLE_LOG_HEADER = b"v1"
# A state file without records: only the int32 -1 that ends every delta, snapshot and v1 changelog.
_NO_RECORDS = struct.pack(">i", -1)
SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"
# Notes and refusals of every skip plan that meets the case.
_SINK_OUTPUT_NOTE = (
    "Output a sink already received from an earlier attempt of this batch (Kafka, a database, any sink "
    "that keeps no log) cannot be taken back by the skip"
)
_NO_SINK_NOTE = (
    "No file sink location was given: if the query writes to a file sink, its _spark_metadata needs an "
    "empty entry {batch} too, or readers of the output fail; plan again with the sink's location"
)
_FORMAT_2_REFUSAL = (
    "{path} uses checkpoint format 2 (state unique ids): the commit of batch {batch} would have to "
    "name the unique id of a version Spark never wrote; skip is not supported for this format"
)
_NO_STATE_AT_BATCH_0 = (
    "batch 0 wrote no state, so the checkpoint cannot tell whether the query keeps state: if it does, "
    "Spark would fail to load state version 1 after the skip"
)


def plan_skip(
    storage: CheckpointStorage,
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    batch: int | None = None,
    source: int | None = None,
    partition: str | None = None,
    to_offset: int | None = None,
    files: Sequence[str] | None = None,
    backup_dir: str | None = None,
    sink_storage: CheckpointStorage | None = None,
    compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> MaintenancePlan:
    """Plan a skip: ``batch`` (skip a whole uncommitted batch), or part of ``source``: a Kafka
    ``partition`` ("<topic>-<p>") moved to ``to_offset``, or named file-source ``files``.

    ``sink_storage`` is the query's file sink (its output directory or its ``_spark_metadata``),
    when it has one: a skipped batch needs an empty entry in the sink's log. ``compact_interval`` is the
    configured ``fileSink``/``fileSource.log.compactInterval``, from which Spark derives a log's interval."""
    backup = {"backup_dir": backup_dir} if backup_dir is not None else {}
    logs = LogSettings(sink_storage, compact_interval)
    if batch is not None:
        return plan_skip_batch(storage, int(batch), now=now, quiet_seconds=quiet_seconds, parameters=backup, logs=logs)
    request = {**_source_request(source, partition, to_offset, files), **backup}
    return plan_skip_source(storage, request, now=now, quiet_seconds=quiet_seconds, logs=logs)


def _source_request(
    source: int | None, partition: str | None, to_offset: int | None, files: Sequence[str] | None
) -> dict[str, Any]:
    """The parameters of a source skip, checked for one of its two shapes (ints as ints: a form sends text)."""
    if source is None:
        raise ValueError("a skip names a batch, or a source with a partition and to_offset, or with files")
    if partition is not None and to_offset is not None and files is None:
        return {"source": int(source), "partition": str(partition), "to_offset": int(to_offset)}
    if files is not None and partition is None and to_offset is None:
        return {"source": int(source), "files": [str(name) for name in files]}
    raise ValueError("a source skip takes either partition and to_offset (Kafka) or files (file source)")


def plan_skip_batch(
    storage: CheckpointStorage,
    batch: int,
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    parameters: Mapping[str, Any] | None = None,
    logs: LogSettings | None = None,
) -> MaintenancePlan:
    """Plan skip (a): batch ``batch`` (the latest, uncommitted) marked done with its state carried forward."""
    listings, start = _start(storage, {"batch": batch, **(parameters or {})}, now=now, quiet_seconds=quiet_seconds)
    position = batch_position(listings, batch)
    if _is_committed_latest(listings, batch):
        # Spark ran it, or this skip did before its worker died: the run that resumes ends here.
        return start.nothing_to_do(f"nothing to do: batch {batch} is committed (commits/{batch} exists)")
    if not position.ok:
        return start.finish(summary=f"nothing to do: batch {batch} cannot be skipped", preconditions=(position,))
    return _finish_batch_skip(survey_skip(storage, listings, batch, logs=logs), start, position)


def _finish_batch_skip(skip: SkipSurvey, start: PlanStart, position: Precondition) -> MaintenancePlan:
    """The plan of skip (a): the writes of the ``skip`` survey, after the batch's ``position``."""
    return start.finish(
        writes=skip.writes,
        preconditions=(position, *skip.preconditions),
        summary=skip.summary(),
        notes=skip.notes,
    )


def _start(
    storage: CheckpointStorage, parameters: Mapping[str, Any], *, now: float, quiet_seconds: float
) -> tuple[StateListings, PlanStart]:
    """The listings a skip plan judges, and the plan's start (``parameters``, "query-stopped")."""
    listings = list_state_listings(storage)
    return listings, start_plan(
        ACTION, parameters, listings.offsets, listings.commits, now=now, quiet_seconds=quiet_seconds
    )


def _is_committed_latest(listings: StateListings, batch: int) -> bool:
    """``batch`` is the latest of the offset log and committed: a skip (a) of it has nothing to do."""
    return batch in listings.commit_ids and listings.offset_ids[-1:] == [batch]


def batch_position(listings: StateListings, batch: int) -> Precondition:
    """ "batch-uncommitted": ``batch`` is the latest batch of the offset log, has no commit, and the
    batch before it has one (Spark runs only the latest batch again at restart)."""
    problem = _position_problem(listings, batch)
    if problem is not None:
        return precondition("batch-uncommitted", False, problem)
    return precondition("batch-uncommitted", True, f"offsets/{batch} is the latest batch and has no commit")


def _position_problem(listings: StateListings, batch: int) -> str | None:
    """Why ``batch`` is not the one batch a skip can take (see :func:`batch_position`), or None."""
    offsets, commits = listings.offset_ids, set(listings.commit_ids)
    latest = offsets[-1] if offsets else None
    if latest is None:
        return "the offset log is empty: no batch has started"
    if batch != latest:
        return (
            f"batch {batch} is not the latest batch of the offset log (latest: {latest}); "
            "only the batch a restart runs again can be skipped"
        )
    if batch in commits:
        return f"batch {batch} is committed (commits/{batch} exists)"
    if batch > 0 and batch - 1 not in commits:
        return f"commits/{batch - 1} is missing: the batch before {batch} never finished (repair the commit log first)"
    return None


@dataclass(frozen=True, slots=True)
class LogSettings:
    """Where the query's file sink is (None: unknown or none) and the configured compact interval."""

    sink_storage: CheckpointStorage | None = None
    compact_interval: int = DEFAULT_COMPACT_INTERVAL


@dataclass
class SkipSurvey:
    """What carrying batch N's state forward takes: the writes, their preconditions and notes."""

    batch: int
    conf: StateConf
    partitions: int | None
    writes: list[PlannedWrite] = field(default_factory=list)
    preconditions: list[Precondition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    stores: int = 0

    def summary(self) -> str:
        state = f" and carry the state of {plural(self.stores, 'store')} forward" if self.stores else ""
        return f"mark batch {self.batch} done without running it{state} (write {plural(len(self.writes), 'file')})"


def survey_skip(
    storage: CheckpointStorage,
    listings: StateListings,
    batch: int,
    *,
    describe: bool = True,
    logs: LogSettings | None = None,
) -> SkipSurvey:
    """The writes that commit ``batch`` without running it (state files first, the commit last)."""
    try:
        offsets = read_offset_seq(storage, batch)
        previous_commit = read_commit(storage, batch - 1) if batch > 0 else None
    except CheckpointError as exc:
        return _unreadable_logs_survey(batch, exc)
    conf = offsets.metadata.conf if offsets.metadata else {}
    survey = SkipSurvey(batch, state_conf(conf), _shuffle_partitions(conf))
    survey.preconditions.append(precondition("logs-readable", True, f"offsets/{batch} and the commit before it read"))
    _survey_state(survey, listings)
    _survey_sink(survey, logs or LogSettings())
    _survey_commit(survey, listings, previous_commit)
    if describe:
        survey.notes.extend(skipped_ranges_notes(storage, batch, offsets))
    survey.notes.append(_SINK_OUTPUT_NOTE)
    return survey


def _unreadable_logs_survey(batch: int, error: CheckpointError) -> SkipSurvey:
    """The survey of a batch whose offsets or previous commit cannot be read: "logs-readable" fails."""
    survey = SkipSurvey(batch, state_conf({}), None)
    survey.preconditions.append(precondition("logs-readable", False, str(error)))
    return survey


def _survey_commit(survey: SkipSurvey, listings: StateListings, previous_commit: Any) -> None:
    """The commit of the batch, written last, and the precondition on the format of the commit before it."""
    commit = _commit_write(listings, survey.batch, previous_commit)
    survey.preconditions.append(_commit_format(previous_commit, survey.batch))
    survey.writes.append(commit)


def _survey_sink(survey: SkipSurvey, logs: LogSettings) -> None:
    """The file sink's log gets an empty entry for the batch (FileStreamSink adds one per batch, and
    readers of the output demand every id from the latest compaction on: "…/N doesn't exist")."""
    sink_storage = logs.sink_storage
    if sink_storage is None:
        survey.notes.append(_NO_SINK_NOTE.format(batch=survey.batch))
        return
    log_dir, _ = sink_log_location(sink_storage)
    entries = sink_storage.list_dir(log_dir)
    listing = log_batch_files(entries)
    latest = max(listing, default=-1)
    if latest >= survey.batch:
        survey.notes.append(_sink_ahead_note(log_dir, listing, survey.batch))
        return
    if latest != survey.batch - 1:
        survey.refused.append(f"the file sink's log ends at batch {latest}, not at {survey.batch - 1}")
        return
    crc = directory_uses_hadoop_crc({info.name for info in entries})
    survey.writes.append(_sink_write(log_dir, listing, survey.batch, crc, logs.compact_interval))


def _sink_ahead_note(log_dir: str, listing: Mapping[int, Any], batch: int) -> str:
    """Why the file sink's log, which reaches ``batch`` already, gets no entry for it."""
    if batch in listing:
        return (
            f"the file sink's log already has batch {batch} ({join(log_dir, listing[batch].name)}): "
            "its output stays in the sink, and Spark does not write it again"
        )
    return f"the file sink's log is ahead of batch {batch}"


def _sink_write(log_dir: str, listing: Mapping[int, Any], batch: int, crc: bool, default_interval: int) -> PlannedWrite:
    """``_spark_metadata/N`` without entries, or ``N.compact`` repeating the entries before it."""
    interval = log_compact_interval(listing, default_interval)
    if not is_compaction_batch(batch, interval):
        return PlannedWrite(
            SINK_PREFIX + join(log_dir, str(batch)),
            (),
            2,
            f"the file sink's entry for batch {batch}: no file",
            hadoop_crc=crc,
        )
    return _sink_compaction_write(log_dir, listing, batch, crc, interval)


def _sink_compaction_write(
    log_dir: str, listing: Mapping[int, Any], batch: int, crc: bool, interval: int
) -> PlannedWrite:
    """``N.compact`` of the file sink's log: the entries of the files before it, none of its own."""
    names = {info.name for info in listing.values()}
    inputs = [name for name in compaction_input_names(batch, interval)[:-1] if name in names]
    sizes = {info.name: info.size for info in listing.values()}
    return PlannedWrite(
        SINK_PREFIX + join(log_dir, f"{batch}{COMPACT_FILE_SUFFIX}"),
        tuple(FileState(SINK_PREFIX + join(log_dir, name), sizes[name]) for name in inputs),
        sum(sizes[name] for name in inputs),
        f"the file sink's compaction batch {batch}: the entries before it and no file of its own",
        hadoop_crc=crc,
    )


def _shuffle_partitions(conf: Mapping[str, str]) -> int | None:
    value = conf.get(SHUFFLE_PARTITIONS_CONF, "")
    return int(value) if value.isdigit() else None


def _survey_state(survey: SkipSurvey, listings: StateListings) -> None:
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


def _commit_format(previous: Any, batch: int) -> Precondition:
    version = previous.version if previous is not None else 1
    if version == 1:
        return precondition("commit-format", True, "commit log v1: the commit carries only the watermark")
    return precondition(
        "commit-format",
        False,
        f"commits/{batch - 1} is v{version} (state unique ids or sink metadata): a commit of a skipped batch "
        "cannot name state files Spark never wrote; not supported",
    )


def _commit_write(listings: StateListings, batch: int, previous: Any) -> PlannedWrite:
    names = {info.name for info in listings.commits}
    inputs = ()
    if previous is not None:
        prior = next(info for info in listings.commits if info.name == str(batch - 1))
        inputs = (FileState(f"{COMMITS_DIR}/{batch - 1}", prior.size),)
    watermark = previous.next_batch_watermark_ms if previous is not None else 0
    return PlannedWrite(
        path=f"{COMMITS_DIR}/{batch}",
        inputs=inputs,
        estimated_bytes=len(commit_bytes(watermark)),
        reason=f"marks batch {batch} done; watermark {watermark} carried from "
        + (f"commits/{batch - 1}" if previous is not None else "the start (no batch before)"),
        hadoop_crc=directory_uses_hadoop_crc(names),
    )


def commit_bytes(watermark_ms: int) -> bytes:
    """``commits/N`` as CommitLog v1 writes it: the version line, then the metadata JSON, no newline."""
    return b'v1\n{"nextBatchWatermarkMs":' + str(watermark_ms).encode() + b"}"


def skipped_ranges_notes(storage: CheckpointStorage, batch: int, offsets: OffsetSeq) -> list[str]:
    """Say, per source, what batch ``batch`` would have read: from the end offsets of the batch
    before to those of ``offsets/N`` (file sources also with the number of files)."""
    previous = None
    if batch > 0:
        try:
            previous = read_offset_seq(storage, batch - 1)
        except CheckpointError:
            previous = None
    notes = []
    for index, end in enumerate(offsets.offsets):
        start = previous.offsets[index] if previous is not None and index < len(previous.offsets) else None
        notes.append(f"source {index}: skipped " + describe_source_range(storage, index, start, end))
    return notes


def plan_skip_source(
    storage: CheckpointStorage,
    request: Mapping[str, Any],
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    logs: LogSettings | None = None,
) -> MaintenancePlan:
    """Plan skip (b): the latest, uncommitted batch N is rewritten to read only what is skipped (a Kafka
    partition's offsets up to ``to_offset``, or the named files), then marked done as skip (a) does; what
    else N would have read is read by batch N + 1."""
    listings, start = _start(storage, request, now=now, quiet_seconds=quiet_seconds)
    batch = listings.offset_ids[-1] if listings.offset_ids else -1
    position = batch_position(listings, batch)
    if not position.ok:
        return start.finish(summary="nothing to do: no uncommitted batch to skip from", preconditions=(position,))
    rewrite = _rewrite_or_refusal(storage, batch, request, logs)
    if isinstance(rewrite, Precondition):
        return start.finish(summary="nothing to do: the skip is refused", preconditions=(position, rewrite))
    return _finish_source_skip(storage, start, listings, position, rewrite, logs)


def _rewrite_or_refusal(
    storage: CheckpointStorage, batch: int, request: Mapping[str, Any], logs: LogSettings | None
) -> SourceRewrite | Precondition:
    """The rewrites of a source skip of ``batch``, or the failed "source-range" that refuses it."""
    try:
        return skip_source_writes(storage, batch, request, (logs or LogSettings()).compact_interval)
    except (SkipRefused, CheckpointError) as exc:
        return precondition("source-range", False, str(exc))


def _finish_source_skip(
    storage: CheckpointStorage,
    start: PlanStart,
    listings: StateListings,
    position: Precondition,
    rewrite: SourceRewrite,
    logs: LogSettings | None,
) -> MaintenancePlan:
    """The plan of a source skip: the ``rewrite`` of the latest batch, then skip (a)'s writes for it."""
    batch = listings.offset_ids[-1]
    skip = survey_skip(storage, listings, batch, describe=False, logs=logs)
    return start.finish(
        writes=(*rewrite.writes, *skip.writes),
        preconditions=(position, precondition("source-range", True, rewrite.what), *skip.preconditions),
        summary=f"skip {rewrite.what}: batch {batch} reads only that and is marked done without running",
        notes=(*rewrite.notes, *skip.notes),
    )


@dataclass(frozen=True, slots=True)
class SourceRewrite:
    """The log rewrites of a source skip (before the state and commit writes), what is skipped, notes."""

    writes: tuple[PlannedWrite, ...]
    what: str
    notes: tuple[str, ...]


def skip_source_writes(
    storage: CheckpointStorage, batch: int, request: Mapping[str, Any], compact_interval: int = DEFAULT_COMPACT_INTERVAL
) -> SourceRewrite:
    """Plan the rewrites of ``offsets/N`` (and of the file source log) for a source skip."""
    if batch == 0:
        raise SkipRefused("batch 0 has no batch before it whose end offsets say where each source starts")
    current = read_offset_seq(storage, batch)
    previous = read_offset_seq(storage, batch - 1)
    source = int(request["source"])
    _check_source_of_both(source, batch, current, previous)
    lines = _other_sources_at_start(current, previous, source)
    if "files" in request:
        logs, what, notes = _file_source_rewrite(
            storage, source, (previous, current), request["files"], compact_interval
        )
    else:
        logs = ()
        what, notes = _kafka_rewrite(batch, current, previous, request, lines)
    offsets_write = [_offsets_write(storage, batch, lines)] if lines else []
    return SourceRewrite((*logs, *offsets_write), what, tuple(notes))


def _check_source_of_both(source: int, batch: int, current: OffsetSeq, previous: OffsetSeq) -> None:
    if not 0 <= source < len(current.offsets) or len(previous.offsets) != len(current.offsets):
        raise SkipRefused(f"source {source} is not a source of both offsets/{batch - 1} and offsets/{batch}")


def _other_sources_at_start(current: OffsetSeq, previous: OffsetSeq, source: int) -> dict[int, str]:
    """The other sources' lines set to where they started (the batch reads nothing from them)."""
    return {
        index: start or SERIALIZED_VOID_OFFSET
        for index, (start, end) in enumerate(zip(previous.offsets, current.offsets, strict=True))
        if index != source and start != end
    }


def _kafka_rewrite(
    batch: int, current: OffsetSeq, previous: OffsetSeq, request: Mapping[str, Any], lines: dict[int, str]
) -> tuple[str, list[str]]:
    """Set source ``request["source"]``'s line of ``offsets/N`` (in ``lines``); what is skipped, and notes."""
    source, partition, to_offset = int(request["source"]), str(request["partition"]), int(request["to_offset"])
    rewritten, count = kafka_skip_offsets(previous.offsets[source], current.offsets[source], partition, to_offset)
    lines[source] = kafka_json(rewritten)
    notes = [
        f"offsets/{batch} source {source} before: {current.offsets[source]}",
        f"offsets/{batch} source {source} after: {lines[source]}",
        f"the skipped batch starts where batch {batch - 1} ended (offsets/{batch - 1}): {previous.offsets[source]}; "
        f"batch {batch + 1} reads every other partition from there and {partition} from {to_offset}",
        f"Kafka must still hold offset {to_offset} of {partition} (else the next batch reports data loss)",
    ]
    what = f"{plural(count, 'offset')} of Kafka partition {partition} (up to offset {to_offset})"
    return what, notes


def _offsets_write(storage: CheckpointStorage, batch: int, lines: Mapping[int, str]) -> PlannedWrite:
    path = f"{OFFSETS_DIR}/{batch}"
    listing = {info.name: info for info in storage.list_dir(OFFSETS_DIR)}
    return PlannedWrite(
        path=path,
        inputs=(FileState(path, listing[str(batch)].size),),
        estimated_bytes=listing[str(batch)].size,
        reason=f"batch {batch} reads only what is skipped: source lines {sorted(lines)} rewritten",
        overwrite=True,
        hadoop_crc=directory_uses_hadoop_crc(listing),
    )


def _file_source_rewrite(
    storage: CheckpointStorage,
    source: int,
    offsets: tuple[OffsetSeq, OffsetSeq],
    files: Sequence[str],
    compact_interval: int,
) -> tuple[tuple[PlannedWrite, ...], str, list[str]]:
    """Split the log batch the uncommitted batch reads: the named files stay in it, the others move to
    the next log batch (the next batch reads them). Files stay logged, so FileStreamSource, which
    treats every logged file as seen, never reads the skipped ones."""
    log_batch, path, size, skipped, remaining = _split_log_batch(storage, source, *offsets, files)
    names = ", ".join(entry.path for entry in skipped)
    what = f"{plural(len(skipped), 'file')} of source {source}"
    notes = [f"skipped files (they stay in sources/{source}/{log_batch}, so Spark never reads them): {names}"]
    if not remaining:
        return (), what + " (every file of the batch)", notes
    next_path = _next_log_batch_path(storage, source, log_batch, (path, files), compact_interval)
    notes.append(f"{plural(len(remaining), 'other file')} of the batch move to {next_path}, read by the next batch")
    return _split_writes(storage, source, (path, size), next_path), what, notes


def _split_writes(
    storage: CheckpointStorage, source: int, log_file: tuple[str, int], next_path: str
) -> tuple[PlannedWrite, PlannedWrite]:
    """The next log batch (``next_path``) with the other files, then the log batch (path, size) without them."""
    path, size = log_file
    inputs = (FileState(path, size),)
    crc = directory_uses_hadoop_crc(listing_names(storage, f"sources/{source}"))
    return (
        PlannedWrite(next_path, inputs, size, "the batch's other files, for the next batch", hadoop_crc=crc),
        PlannedWrite(path, inputs, size, "the batch keeps only the skipped files", overwrite=True, hadoop_crc=crc),
    )


def _next_log_batch_path(
    storage: CheckpointStorage, source: int, log_batch: int, split: tuple[str, Sequence[str]], compact_interval: int
) -> str:
    """The log batch after ``log_batch``, where the other files move; refused where Spark would not read it so.

    ``split``: the path of ``log_batch`` and the files named to skip. The next log batch may exist only
    as an earlier application of this very split wrote it.
    """
    path, files = split
    listing = log_batch_files(storage.list_dir(f"sources/{source}"))
    next_path = f"sources/{source}/{log_batch + 1}"
    if is_compaction_batch(log_batch + 1, log_compact_interval(listing, compact_interval)):
        raise SkipRefused(f"{next_path} would be a compaction batch of sources/{source}; not supported")
    if log_batch + 1 in listing and storage.read_bytes(next_path) != _moved_lines_bytes(storage, path, files):
        raise SkipRefused(f"{next_path} exists already (a batch Spark began to plan); rewind or repair first")
    return next_path


def _split_log_batch(
    storage: CheckpointStorage, source: int, previous: OffsetSeq, current: OffsetSeq, files: Sequence[str]
) -> tuple[int, str, int, list[FileEntry], list[FileEntry]]:
    """The log batch the batch reads, its file and size, and its entries named and not named."""
    last = _only_log_batch_read(source, previous, current)
    found = source_log_file(storage, source, last)
    if found is None:
        raise SkipRefused(f"sources/{source}/{last} does not exist")
    entries = [e for e, _ in source_log_lines(storage.read_bytes(found[0]), source=found[0]) if e.batch_id == last]
    _check_named_files(files, entries, f"sources/{source}/{last}")
    skipped = [e for e in entries if _named(e, files)]
    kept = [e for e in entries if not _named(e, files)]
    return last, found[0], found[1], skipped, kept


def _check_named_files(files: Sequence[str], entries: Sequence[FileEntry], log_path: str) -> None:
    """Refuse a skip that names no file, or a file that is not among the ``entries`` the batch reads."""
    unknown = [name for name in files if not any(same_file(e.path, name) for e in entries)]
    if unknown or not files:
        raise SkipRefused(
            f"not among the {plural(len(entries), 'file')} the batch reads ({log_path}): "
            + (", ".join(unknown) or "no file named")
        )


def _only_log_batch_read(source: int, previous: OffsetSeq, current: OffsetSeq) -> int:
    """The one log batch of file source ``source`` the batch reads; refused when it reads several or none."""
    first, last = file_log_offset(previous.offsets[source]), file_log_offset(current.offsets[source])
    if first is None or last is None:
        raise SkipRefused(f'source {source} is not a file source (its offsets are not {{"logOffset":…}})')
    if last != first + 1:
        raise SkipRefused(
            f"the batch reads log batches {first + 1} to {last} of sources/{source}; only a batch that reads one "
            "log batch can be split"
        )
    return last


def _named(entry: FileEntry, files: Sequence[str]) -> bool:
    return any(same_file(entry.path, name) for name in files)


def listing_names(storage: CheckpointStorage, directory: str) -> set[str]:
    return {info.name for info in storage.list_dir(directory)}


def _moved_lines_bytes(storage: CheckpointStorage, log_path: str, files: Sequence[str]) -> bytes:
    """The next log batch: the not-named entries of the log batch in ``log_path``, renumbered."""
    log_batch = _log_batch_of(log_path)
    pairs = source_log_lines(storage.read_bytes(log_path), source=log_path)
    return source_log_bytes(
        [
            with_batch_id(line, log_batch + 1, source=log_path)
            for e, line in pairs
            if e.batch_id == log_batch and not _named(e, files)
        ]
    )


def _kept_lines_bytes(storage: CheckpointStorage, log_path: str, files: Sequence[str]) -> bytes:
    """The log batch in ``log_path`` without its not-named entries (earlier batches' entries of a
    compaction file stay)."""
    log_batch = _log_batch_of(log_path)
    pairs = source_log_lines(storage.read_bytes(log_path), source=log_path)
    return source_log_bytes([line for e, line in pairs if e.batch_id != log_batch or _named(e, files)])


def _log_batch_of(path: str) -> int:
    return int(posixpath.basename(path).removesuffix(COMPACT_FILE_SUFFIX))


def _offsets_content(storage: CheckpointStorage, write: PlannedWrite, request: Mapping[str, Any]) -> bytes:
    """``offsets/N`` of a source skip, recomputed from the logs (the same after a killed run's rewrite)."""
    batch, source = int(posixpath.basename(write.path)), int(request["source"])
    current, previous = read_offset_seq(storage, batch), read_offset_seq(storage, batch - 1)
    lines = _other_sources_at_start(current, previous, source)
    if "files" not in request:
        _kafka_rewrite(batch, current, previous, request, lines)
    return rewrite_offset_lines(storage.read_bytes(write.path), lines, source=write.path)


def _source_log_content(storage: CheckpointStorage, write: PlannedWrite, request: Mapping[str, Any]) -> bytes:
    log_path = write.inputs[0].path
    if write.path == log_path:
        return _kept_lines_bytes(storage, log_path, request["files"])
    return _moved_lines_bytes(storage, log_path, request["files"])


def build_skip_content(
    storage: CheckpointStorage, write: PlannedWrite, *, conf: StateConf, request: Mapping[str, Any]
) -> bytes:
    """The bytes of one planned write of a skip plan (``request``: the plan's parameters)."""
    name = posixpath.basename(write.path)
    directory = posixpath.dirname(write.path)
    if directory == COMMITS_DIR:
        previous = read_commit(storage, int(name) - 1) if write.inputs else None
        return commit_bytes(previous.next_batch_watermark_ms if previous is not None else 0)
    if directory == OFFSETS_DIR:
        return _offsets_content(storage, write, request)
    if directory.startswith("sources/"):
        return _source_log_content(storage, write, request)
    if name.endswith(".zip"):
        return storage.read_bytes(write.inputs[0].path, max_bytes=None)
    if name.endswith(".snapshot"):
        return build_snapshot_content(storage, write, conf=conf)
    return compress_state_content(_NO_RECORDS, codec=conf.codec, source=write.path)


def apply_skip(
    storage: CheckpointStorage,
    plan: MaintenancePlan,
    *,
    sink_storage: CheckpointStorage | None = None,
    on_step: StepHook | None = None,
) -> AppliedPlan:
    """Write the files of a confirmed skip plan: the checkpoint's, then the file sink's log entry, then the
    commit. A run killed before the commit leaves the batch to run again, and Spark then finds the sink's
    entry and writes no output for it."""
    _check_skip_plan(plan, sink_storage)
    build = functools.partial(build_skip_content, conf=_conf_of(storage, plan), request=plan.parameters)

    def build_any(target: CheckpointStorage, write: PlannedWrite) -> bytes:
        return _sink_content(target, write) if write.path.startswith(SINK_PREFIX) else build(target, write)

    # One apply_plan call, so the run's backup manifest lists every file it writes (an undo then
    # removes the sink's entry and the commit too). The plan orders its writes: the checkpoint's,
    # the sink's log entry, the commit last.
    return apply_plan(storage, plan, build_any, on_step=on_step, sink_storage=sink_storage)


def _check_skip_plan(plan: MaintenancePlan, sink_storage: CheckpointStorage | None) -> None:
    if plan.action != ACTION:
        raise ValueError(f"not a skip plan: {plan.action!r}")
    if plan.deletes:
        raise ValueError("a skip plan deletes nothing; this one was not made by plan_skip")
    if any(w.path.startswith(SINK_PREFIX) for w in plan.writes) and sink_storage is None:
        raise ValueError("the plan writes the file sink's log, but no sink storage was given")


def _on_sink_storage(write: PlannedWrite) -> PlannedWrite:
    """A sink write with its paths relative to the sink's storage (the ``@sink/`` prefix dropped)."""
    inputs = tuple(FileState(i.path.removeprefix(SINK_PREFIX), i.size) for i in write.inputs)
    return dataclasses.replace(write, path=write.path.removeprefix(SINK_PREFIX), inputs=inputs)


def _sink_content(storage: CheckpointStorage, write: PlannedWrite) -> bytes:
    """An empty sink log batch, or a compaction file of the entries before it (``storage``: the sink's)."""
    write = _on_sink_storage(write)
    if not write.inputs:
        return COMPACTIBLE_LOG_HEADER
    return build_compaction_content(storage, write, kind="sink")


def _conf_of(storage: CheckpointStorage, plan: MaintenancePlan) -> StateConf:
    commit = next((w for w in plan.writes if posixpath.dirname(w.path) == COMMITS_DIR), None)
    if commit is None:
        return state_conf({})
    offsets = read_offset_seq(storage, int(posixpath.basename(commit.path)))
    return state_conf(offsets.metadata.conf if offsets.metadata else {})


__all__ = [
    "apply_skip",
    "build_skip_content",
    "commit_bytes",
    "plan_skip",
    "plan_skip_batch",
    "plan_skip_source",
]
