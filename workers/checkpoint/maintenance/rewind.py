"""Rewind a stopped query to batch N: its next run starts at batch N + 1, exactly as the first time.

What a restart reads (MicroBatchExecution.populateStartOffsets, Spark 3.x to 4.3): the latest
``offsets/`` file (N) and the one before it (N - 1, "batch N-1 doesn't exist" without it), and
the latest ``commits/`` file; when both are N the run starts at N + 1 from the offsets of N. So:

* ``offsets/`` and ``commits/`` after N go (``commits/N`` stays: it carries the watermark and,
  with checkpoint format 2, the unique id of each store's version N + 1);
* state: batch b writes version b + 1, so batch N + 1 loads version N + 1 and writes N + 2.
  Every version after N + 1 goes: HDFS ``.delta``/``.snapshot``, RocksDB ``.zip``/``.changelog``
  (any unique id, format 2 included) and the SST and archived log files only those zips list.
  Version N + 1 must still load (the files of its chain are there), else the rewind is refused;
* transformWithState's operator metadata ``state/<op>/_metadata/v2/<b>`` and state schema
  ``state/<op>/_stateSchema/<store>/<b>_<uuid>`` of batches after N go: the first batch of a run
  writes its metadata file write-once (OperatorStateMetadataV2Writer), so a leftover
  ``_metadata/v2/<N+1>`` would fail the restart, and the newest schema file is the one read;
* each file source's log ``sources/<i>``: offsets/N records the source's ``logOffset`` k (a log
  position, not a batch id: batches without new files add no entry). Entries after k go, or the
  restarted source would take their files as already seen (FileStreamSource.seenFiles) and skip
  them. A compaction ``c.compact`` with c > k goes with them; the files allFiles(k) reads (the
  latest compaction at or below k and the batches after it) must exist;
* a file sink's log (``_spark_metadata``, batch ids are the query's): entries after N go, or
  FileStreamSink.addBatch would skip batches N + 1.. as "already committed"; so do the data files
  only those entries list (a compaction after N repeats older entries, which stay listed).

Deletes go in an order that lets a plan made again after a crash find what is left: sink data files
before the log entries that list them, SSTs before the zips that list them; the offsets and commits
go last, newest first. What left the checkpoint (rows sent to Kafka, a database, any sink without a
log) cannot be rewound; the plan says so.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from ..compactible import all_valid_batches, is_compaction_batch, parse_sink_log_file
from ..errors import CheckpointError
from ..fileinfo import FileInfo
from ..layout import COMMITS_DIR, COMPACT_FILE_SUFFIX, OFFSETS_DIR, parse_batch_id
from ..logdir import read_commit, read_offset_seq
from ..metadatalog import file_source_log_dirs, log_batch_files, log_compact_interval, sink_log_location
from ..rocksdbfiles import LOG_DIR, SST_DIR, parse_rocksdb_store_files
from ..rocksdbloadchain import resolve_load_chain
from ..stateinventory import (
    STATE_DIR,
    StateStoreDir,
    detect_provider,
    files_for_version,
    list_state_store_dirs,
    parse_hdfs_state_files,
)
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size, plural
from .backup import check_backup_dir, default_backup_dir
from .cleanup import read_zip_metadata
from .execute import SINK_PATH_PREFIX, AppliedPlan, StepHook, apply_plan
from .plan import MaintenancePlan, PlannedDelete, PlannedWrite, Precondition
from .planning import PlanStart, delete_with_sidecars, join, list_batch_logs, precondition_unless, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS

ACTION = "rewind"

NOT_REWOUND_NOTE = (
    "What the query already sent outside the checkpoint is not rewound: rows written to Kafka, a "
    "database, foreachBatch or any sink that keeps no log are sent again by batches {first} on "
    "(at-least-once), next to what the first run sent."
)
NO_SINK_NOTE = (
    "No file sink location was given: if the query writes to a file sink, its _spark_metadata must "
    "be rewound with it, or the restarted query skips batches {first} on as already written."
)
UNLISTED_SINK_FILES_NOTE = (
    "Data files a batch after {n} wrote without recording them in _spark_metadata (a batch killed "
    "mid-way) are not listed anywhere and stay; Spark's readers ignore them."
)


@dataclass(frozen=True, slots=True)
class _Logs:
    """The offsets and commits listings, as files by batch id and by name."""

    offsets: Mapping[int, FileInfo]
    commits: Mapping[int, FileInfo]
    listings: Mapping[str, Mapping[str, FileInfo]]


@dataclass(slots=True)
class _Part:
    """One part of the plan (a log, the state, the sink): its deletes, the problems that refuse it, notes."""

    deletes: list[PlannedDelete] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def delete_each(self, directory: str, names: Iterable[str], files: Mapping[str, FileInfo], reason: str) -> None:
        """Delete each of ``names`` in ``directory``, in order, each after its sidecars (``files``: its files)."""
        for name in names:
            self.deletes += delete_with_sidecars(directory, name, files, reason, sidecar_reason=f"checksum of {name}")


def plan_rewind(
    storage: CheckpointStorage,
    *,
    to_batch: int,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    sink_storage: CheckpointStorage | None = None,
    backup_dir: str | None = None,
) -> MaintenancePlan:
    """Plan the rewind of the checkpoint in ``storage`` to batch ``to_batch`` (see the module).

    ``sink_storage`` is the file sink's output directory (or its ``_spark_metadata``), when the
    query has one. ``backup_dir`` is where apply copies each file before deleting it.
    """
    _check_to_batch(to_batch)
    offsets, commits = list_batch_logs(storage)
    parameters = {"to_batch": to_batch, "backup_dir": check_backup_dir(backup_dir or default_backup_dir(now))}
    start = start_plan(ACTION, parameters, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    logs = _logs(offsets, commits)
    if not logs.commits:
        return start.nothing_to_do("nothing to rewind: no batch is committed yet")
    latest = max([*logs.commits, *logs.offsets])
    if to_batch >= latest:
        return start.nothing_to_do(f"nothing to rewind: batch {to_batch} is not before the latest batch ({latest})")
    return _rewind_unless_refused(storage, start, logs, sink_storage, latest)


def _check_to_batch(to_batch: object) -> None:
    if isinstance(to_batch, bool) or not isinstance(to_batch, int) or to_batch < 0:
        raise ValueError(f"to_batch must be a batch id (an integer >= 0), got {to_batch!r}")


def _rewind_unless_refused(
    storage: CheckpointStorage, start: PlanStart, logs: _Logs, sink_storage: CheckpointStorage | None, latest: int
) -> MaintenancePlan:
    """The plan that deletes everything after ``to_batch``, or the refusal that says what stands in its way."""
    to_batch = start.parameters["to_batch"]
    stores = list_state_store_dirs(storage)
    batch_problems = _batch_problems(logs, to_batch)
    if batch_problems:
        return _refused(storage, start, logs, stores, sink_storage, batch_problems)
    parts = _plan_parts(storage, logs, stores, sink_storage, to_batch)
    problems = [p for part in parts.values() for p in part.problems]
    if problems:
        return _refused(storage, start, logs, stores, sink_storage, problems)
    deletes = [d for name in ("sink", "sources", "state", "logs") for d in parts[name].deletes]
    notes = [note for part in parts.values() for note in part.notes]
    return start.finish(
        summary=_summary(to_batch, latest, deletes),
        preconditions=_preconditions(to_batch, ()),
        deletes=deletes,
        notes=[NOT_REWOUND_NOTE.format(first=to_batch + 1), *notes],
    )


def _logs(offsets: Sequence[FileInfo], commits: Sequence[FileInfo]) -> _Logs:
    def by_id(listing: Sequence[FileInfo]) -> dict[int, FileInfo]:
        ids = ((parse_batch_id(info.name), info) for info in listing if not info.is_dir)
        return {batch_id: info for batch_id, info in ids if batch_id is not None}

    listings = {OFFSETS_DIR: {i.name: i for i in offsets}, COMMITS_DIR: {i.name: i for i in commits}}
    return _Logs(by_id(offsets), by_id(commits), listings)


def _batch_problems(logs: _Logs, to_batch: int) -> list[str]:
    """What a restart at ``to_batch`` + 1 reads from offsets/ and commits/ and is missing."""
    needed = [(COMMITS_DIR, to_batch, logs.commits), (OFFSETS_DIR, to_batch, logs.offsets)]
    if to_batch > 0:
        needed.append((OFFSETS_DIR, to_batch - 1, logs.offsets))
    return [
        f"{log}/{batch_id} is gone (a restart at batch {to_batch + 1} reads it)"
        for log, batch_id, files in needed
        if batch_id not in files
    ]


def _plan_parts(
    storage: CheckpointStorage,
    logs: _Logs,
    stores: Sequence[StateStoreDir],
    sink_storage: CheckpointStorage | None,
    to_batch: int,
    *,
    only_check: bool = False,
) -> dict[str, _Part]:
    """Each part's deletes and problems; ``only_check`` skips the reads that only the deletes need
    (zip metadata, the sink log's entries), for the search of a batch that can be rewound to."""
    return {
        "sink": _sink_part(sink_storage, to_batch, only_check=only_check),
        "sources": _sources_part(storage, to_batch),
        "state": _state_part(storage, stores, to_batch, only_check=only_check),
        "logs": _logs_part(logs, to_batch),
    }


# --- offsets and commits ---------------------------------------------------------------------------


def _logs_part(logs: _Logs, to_batch: int) -> _Part:
    """Newest batch first, its commit before its offsets: what remains is always a log Spark restarts from
    (a latest batch with its offsets, committed or to be run again)."""
    part = _Part()
    later = sorted({b for b in (*logs.offsets, *logs.commits) if b > to_batch}, reverse=True)
    for batch_id in later:
        for log, files in ((COMMITS_DIR, logs.commits), (OFFSETS_DIR, logs.offsets)):
            if batch_id in files:
                name = files[batch_id].name
                reason = f"batch {batch_id} is after batch {to_batch}, the batch rewound to"
                part.deletes += delete_with_sidecars(
                    log, name, logs.listings[log], reason, sidecar_reason=f"checksum of {log}/{name}"
                )
    return part


# --- state -----------------------------------------------------------------------------------------


def _state_part(
    storage: CheckpointStorage, stores: Sequence[StateStoreDir], to_batch: int, *, only_check: bool = False
) -> _Part:
    part = _Part()
    version = to_batch + 1
    for store in stores:
        provider = detect_provider(store.files)
        if provider == "hdfs":
            _hdfs_store(part, store, version)
        elif provider == "rocksdb":
            _rocksdb_store(part, storage, store, version, to_batch, only_check=only_check)
    for operator in sorted({store.operator for store in stores}):
        _operator_metadata(part, storage, operator, to_batch)
    return part


def _operator_metadata(part: _Part, storage: CheckpointStorage, operator: int, to_batch: int) -> None:
    """Operator metadata v2 and schema v3 files written by batches after ``to_batch`` (transformWithState)."""
    operator_dir = f"{STATE_DIR}/{operator}"
    reason = f"written by batch {{}}, after batch {to_batch}"
    for directory in (f"{operator_dir}/_metadata/v2", f"{operator_dir}/_metadata/metadata/v2"):
        _batch_named_files(part, storage, directory, to_batch, lambda name: parse_batch_id(name), reason)
    schema_root = f"{operator_dir}/_stateSchema"
    for store_dir in (info.name for info in storage.list_dir(schema_root) if info.is_dir):
        directory = f"{schema_root}/{store_dir}"
        _batch_named_files(part, storage, directory, to_batch, lambda name: parse_batch_id(name.split("_")[0]), reason)


def _batch_named_files(part: _Part, storage: CheckpointStorage, directory: str, to_batch: int, batch_of, reason: str):
    files = {info.name: info for info in storage.list_dir(directory) if not info.is_dir}
    named = [(batch_of(name), name) for name in files if not name.startswith(".") and not name.endswith(".crc")]
    for batch_id, name in sorted(((b, n) for b, n in named if b is not None and b > to_batch), reverse=True):
        part.deletes += delete_with_sidecars(
            directory, name, files, reason.format(batch_id), sidecar_reason=f"checksum of {name}"
        )


def _hdfs_store(part: _Part, store: StateStoreDir, version: int) -> None:
    entries = {info.name: _as_file_info(info) for info in store.files if not info.is_dir}
    kept, _ = parse_hdfs_state_files([info for info in store.files if _version_of(info.name) <= version])
    try:
        files_for_version(kept, version, source=store.path)
    except CheckpointError as exc:
        part.problems.append(f"state version {version} of {store.path} cannot be loaded: {exc}")
        return
    later = _hdfs_files_after(entries, version)
    reason = f"state version after {version}, the version batch {version} loads"
    part.delete_each(store.path, later, entries, reason)


def _hdfs_files_after(names: Iterable[str], version: int) -> list[str]:
    """The HDFS state files among ``names`` of versions after ``version``, newest first."""
    return sorted((n for n in names if _hdfs_version(n) is not None and _hdfs_version(n) > version), reverse=True)


def _hdfs_version(name: str) -> int | None:
    stem, dot, kind = name.partition(".")
    return parse_batch_id(stem) if dot and kind.lower() in ("delta", "snapshot") else None


def _version_of(name: str) -> int:
    """The version an HDFS state file name carries (-1 for any other name, which is kept)."""
    version = _hdfs_version(name)
    return -1 if version is None else version


def _rocksdb_store(
    part: _Part, storage: CheckpointStorage, store: StateStoreDir, version: int, to_batch: int, *, only_check: bool
) -> None:
    listing = _rocksdb_listing(storage, store)
    files = parse_rocksdb_store_files(listing[""].values(), listing[SST_DIR].values(), listing[LOG_DIR].values())
    problem = _rocksdb_load_problem(storage, store, files, version, to_batch)
    if problem or only_check:
        part.problems += [problem] if problem else []
        return
    doomed = [f for f in (*files.zips, *files.changelogs) if f.version > version]
    metadata = read_zip_metadata(storage, [store]) if any(f.kind == "zip" for f in doomed) else {}
    _delete_unshared(part, store, files, doomed, metadata, listing)
    newest_first = [f.name for f in sorted(doomed, key=lambda f: (f.version, f.kind), reverse=True)]
    reason = f"state version after {version}, the version batch {version} loads"
    part.delete_each(store.path, newest_first, listing[""], reason)


def _rocksdb_listing(storage: CheckpointStorage, store: StateStoreDir) -> dict[str, dict[str, FileInfo]]:
    """The store directory's files and those of its SSTs/ and logs/, by name."""
    listing = {"": {info.name: _as_file_info(info) for info in store.files if not info.is_dir}}
    for sub in (SST_DIR, LOG_DIR):
        has_dir = any(info.is_dir and info.name == sub for info in store.files)
        listing[sub] = {i.name: i for i in storage.list_dir(f"{store.path}/{sub}")} if has_dir else {}
    return listing


def _rocksdb_load_problem(storage: CheckpointStorage, store: StateStoreDir, files, version: int, to_batch: int):
    """Why version ``version`` of a RocksDB store cannot load, or None.

    Format 2 loads the version whose unique id ``commits/<to_batch>`` records; format 1 the newest
    zip at or below it and the changelogs after it.
    """
    if files.checkpoint_format == 2:
        return _format2_load_problem(storage, store, files, version, to_batch)
    chain = resolve_load_chain(files, version)
    if chain.is_loadable:
        return None
    return f"state version {version} of {store.path} cannot be loaded: {'; '.join(chain.problems)}"


def _format2_load_problem(storage: CheckpointStorage, store: StateStoreDir, files, version: int, to_batch: int):
    """Format 2: the zip or changelog of the unique id ``commits/<to_batch>`` records for the store.

    Where the commit's per-store order is not known (a store other than "default"), any file of
    the version will do.
    """
    unique_id = _committed_unique_id(storage, store, to_batch)
    if unique_id is None:
        present = bool(files.unique_ids_of(version))
    else:
        present = bool(files.find("zip", version, unique_id) or files.find("changelog", version, unique_id))
    if present:
        return None
    return f"state version {version} of {store.path} is gone (no {version}_{unique_id or '<id>'}.zip or .changelog)"


def _committed_unique_id(storage: CheckpointStorage, store: StateStoreDir, to_batch: int) -> str | None:
    ids = (read_commit(storage, to_batch).state_unique_ids or {}).get(store.operator) or []
    stores = ids[store.partition] if store.partition < len(ids) else []
    return stores[0] if stores and store.store == "default" else None


def _delete_unshared(part: _Part, store: StateStoreDir, files, doomed, metadata, listing) -> None:
    """The SST and log files that only doomed zips list (no kept zip does), before those zips."""
    doomed_zips = [join(store.path, f.name) for f in doomed if f.kind == "zip"]
    kept_zips = [join(store.path, z.name) for z in files.zips if join(store.path, z.name) not in doomed_zips]
    if any(metadata.get(path) is None for path in (*doomed_zips, *kept_zips)):
        if doomed_zips:
            part.notes.append(f"{store.path}: a zip's metadata is unreadable, so no SST file is deleted")
        return
    reason = "listed only by zips of state versions that are rewound"
    for sub, pick in ((SST_DIR, lambda m: m.sst_files), (LOG_DIR, lambda m: m.log_files)):
        listed_by_doomed = _listed_by(doomed_zips, metadata, pick)
        unshared = sorted((listed_by_doomed - _listed_by(kept_zips, metadata, pick)) & set(listing[sub]))
        part.delete_each(f"{store.path}/{sub}", unshared, listing[sub], reason)


def _listed_by(zips: Iterable[str], metadata, pick) -> set[str]:
    """The DFS file names the ``zips``' ``metadata`` lists in the part ``pick`` selects (SST or log files)."""
    return {f.dfs_file_name for path in zips for f in pick(metadata[path])}


def _as_file_info(info) -> FileInfo:
    return FileInfo(info.name, info.size, None, info.is_dir)


# --- compactible logs: file sources and the file sink -----------------------------------------------


def _sources_part(storage: CheckpointStorage, to_batch: int) -> _Part:
    part = _Part()
    offsets = read_offset_seq(storage, to_batch).offsets
    parsed = [_json_or_none(raw) for raw in offsets]
    for log_dir in file_source_log_dirs(parsed):
        log_offset = parsed[int(log_dir.rpartition("/")[2])]["logOffset"]
        listing = {info.name: info for info in storage.list_dir(log_dir)}
        where = f"offsets/{to_batch} records log offset {log_offset} for it"
        _rewind_compactible_log(part, log_dir, listing, log_offset, where=where, plan_dir=log_dir)
    return part


def _json_or_none(raw: str | None):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _rewind_compactible_log(
    part: _Part, log_dir: str, listing: Mapping[str, FileInfo], keep_to: int, *, where: str, plan_dir: str
) -> list[str]:
    """Delete a compactible log's entries after ``keep_to``, newest first; return the names deleted.

    The files allFiles(``keep_to``) reads must exist: the latest compaction at or below it and
    every batch after that compaction, by the interval Spark derived from the log's compactions.
    """
    batches = log_batch_files(listing.values())
    later = sorted((b for b in batches if b > keep_to), reverse=True)
    if not later:
        return []
    interval = log_compact_interval(batches)
    needed = all_valid_batches(keep_to, interval) if keep_to >= 0 else []
    missing = [b for b in needed if b not in batches or batches[b].name != _log_name(b, interval)]
    if missing:
        names = ", ".join(f"{log_dir}/{_log_name(b, interval)}" for b in missing[:5])
        part.problems.append(f"{names} is gone ({where}; Spark's allFiles reads it)")
        return []
    names = [batches[b].name for b in later]
    part.delete_each(plan_dir, names, listing, f"log entry after {keep_to} ({where})")
    return names


def _log_name(batch_id: int, interval: int) -> str:
    """batchIdToPath: ``N.compact`` for a compaction batch, else ``N``."""
    return f"{batch_id}{COMPACT_FILE_SUFFIX}" if is_compaction_batch(batch_id, interval) else str(batch_id)


def _sink_part(sink_storage: CheckpointStorage | None, to_batch: int, *, only_check: bool = False) -> _Part:
    if sink_storage is None:
        return _Part(notes=[NO_SINK_NOTE.format(first=to_batch + 1)])
    log_dir, _ = sink_log_location(sink_storage)
    listing = {info.name: info for info in sink_storage.list_dir(log_dir)}
    log = _Part()
    plan_dir = SINK_PATH_PREFIX + log_dir if log_dir else SINK_PATH_PREFIX.rstrip("/")
    where = "written by a batch after the one rewound to"
    deleted = _rewind_compactible_log(log, log_dir, listing, to_batch, where=where, plan_dir=plan_dir)
    if log.problems or not deleted or only_check:
        return log
    data = _sink_data_part(sink_storage, log_dir, listing, deleted, to_batch)
    return _Part(data.deletes + log.deletes, data.problems, data.notes + log.notes)


def _sink_data_part(
    sink_storage: CheckpointStorage, log_dir: str, listing: Mapping[str, FileInfo], deleted: Sequence[str], n: int
) -> _Part:
    """The data files that only the deleted sink log files list."""
    part = _Part(notes=[UNLISTED_SINK_FILES_NOTE.format(n=n)])
    doomed = _listed_only_by_deleted(sink_storage, log_dir, listing, deleted, n)
    if not log_dir:
        part.notes.append(f"the sink's data files ({len(doomed)}) are outside the sink log's storage and stay")
        return part
    reason = f"data file listed only by sink log entries after batch {n}"
    for directory, names in _by_directory(part, sink_storage.url, doomed).items():
        files = {info.name: info for info in sink_storage.list_dir(directory)}
        plan_dir = SINK_PATH_PREFIX + directory if directory else SINK_PATH_PREFIX.rstrip("/")
        part.delete_each(plan_dir, [name for name in names if name in files], files, reason)
    return part


def _listed_only_by_deleted(
    sink_storage: CheckpointStorage, log_dir: str, listing: Mapping[str, FileInfo], deleted: Sequence[str], n: int
) -> set[str]:
    """The data files the ``deleted`` sink log files list and no file a reader of batch ``n`` reads does."""
    kept_names = [name for name in listing if name not in deleted]
    kept_batches = log_batch_files(listing[name] for name in kept_names)
    interval = log_compact_interval(log_batch_files(listing.values()))
    read_for_n = [_log_name(b, interval) for b in (all_valid_batches(n, interval) if kept_batches else [])]
    still_listed = _listed_paths(sink_storage, log_dir, read_for_n)
    return _listed_paths(sink_storage, log_dir, deleted) - still_listed


def _by_directory(part: _Part, root_url: str, paths: Iterable[str]) -> dict[str, list[str]]:
    """The sorted ``paths`` under ``root_url``: directory -> file names; a note in ``part`` for each outside it."""
    by_dir: dict[str, list[str]] = {}
    for path in sorted(paths):
        relpath = _relative_to(root_url, path)
        if relpath is None:
            part.notes.append(f"{path} is outside the sink's output directory and stays")
            continue
        by_dir.setdefault(posixpath.dirname(relpath), []).append(posixpath.basename(relpath))
    return by_dir


def _listed_paths(sink_storage: CheckpointStorage, log_dir: str, names: Iterable[str]) -> set[str]:
    paths = set()
    for name in names:
        relpath = join(log_dir, name)
        paths |= {s.path for s in parse_sink_log_file(sink_storage.read_bytes(relpath), source=relpath)}
    return paths


def _relative_to(root_url: str, path: str) -> str | None:
    """``path`` (a URI from the sink log) relative to the storage rooted at ``root_url``, or None."""
    root, target = urlparse(root_url), urlparse(path)
    if (root.scheme or "file") != (target.scheme or "file") or (root.netloc or "") != (target.netloc or ""):
        return None
    base = posixpath.normpath(root.path) + "/"
    full = posixpath.normpath(unquote(target.path))  # Spark logs path.toUri: percent-encoded
    return full[len(base) :] if full.startswith(base) else None


# --- refusal, preconditions and summary -----------------------------------------------------------


def _refused(storage, start, logs: _Logs, stores, sink_storage, problems: Sequence[str]) -> MaintenancePlan:
    """The plan that refuses the rewind: what is gone, and the newest batch that can be rewound to."""
    to_batch = start.parameters["to_batch"]
    newest = newest_rewindable_batch(storage, logs, stores, sink_storage, below=max(logs.commits))
    hint = (
        f"the newest batch that can be rewound to is {newest}" if newest is not None else "no batch can be rewound to"
    )
    return start.finish(
        summary=f"cannot rewind to batch {to_batch}: {problems[0]}; {hint}",
        preconditions=_preconditions(to_batch, [*problems, hint]),
    )


def newest_rewindable_batch(
    storage: CheckpointStorage, logs: _Logs, stores: Sequence[StateStoreDir], sink_storage, *, below: int
) -> int | None:
    """The newest committed batch before ``below`` whose rewind nothing refuses, or None."""
    for candidate in sorted((b for b in logs.commits if b < below), reverse=True):
        if _batch_problems(logs, candidate):
            continue
        parts = _plan_parts(storage, logs, stores, sink_storage, candidate, only_check=True)
        if not any(part.problems for part in parts.values()):
            return candidate
    return None


def _preconditions(to_batch: int, problems: Sequence[str]) -> tuple[Precondition, ...]:
    return (
        precondition_unless(
            "rewind-needs",
            problems,
            f"batch {to_batch} is committed, and every file a restart at batch {to_batch + 1} reads is there",
            prefix="a file the restart needs is gone: ",
        ),
    )


def _summary(to_batch: int, latest: int, deletes: Sequence[PlannedDelete]) -> str:
    freed = sum(d.size for d in deletes)
    return (
        f"rewind from batch {latest} to batch {to_batch}: delete {plural(len(deletes), 'file')} "
        f"({format_size(freed)}); the next run starts at batch {to_batch + 1}"
    )


def _no_content(storage: CheckpointStorage, write: PlannedWrite) -> bytes:
    raise ValueError(f"{write.path}: a rewind plan has no writes")


def apply_rewind(
    storage: CheckpointStorage,
    plan: MaintenancePlan,
    *,
    on_step: StepHook | None = None,
    sink_storage: CheckpointStorage | None = None,
) -> AppliedPlan:
    """Carry out a confirmed rewind plan (deletes only, each file copied to the backup first)."""
    return apply_plan(storage, plan, _no_content, on_step=on_step, sink_storage=sink_storage)
