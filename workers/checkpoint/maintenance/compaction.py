"""Compact and expire the compactible metadata logs: a file source's ``sources/<i>`` and a file sink's
``_spark_metadata`` (CompactibleFileStreamLog, §5).

One action, ``plan_compaction`` / ``apply_compaction``: first the compaction file the log lacks,
then the expired files, so nothing is deleted before the file that replaces it exists.

Expire (``expiry_plan_from_listings``) deletes what Spark's ``deleteExpiredLog`` would delete right now,
after the latest batch of the log: every file older than the compaction that the oldest retained
batch is read through, if its mtime is older than the cleanup delay (``compactible.
plan_expired_files``). It is for logs Spark did not clean (``fileSink.log.deletion`` /
``fileSource.log.deletion`` false, or the query stopped first). Oldest first, sidecars before
their file, so what remains is always the newest part of the log, which is all a reader reads.

Compact (``compaction_plan_from_listings``) writes the compaction file ``c.compact`` of the latest
compaction batch c when it is missing or unreadable, the way Spark's ``compact`` does: ``v1``,
then the entries of ``getValidBatchesBeforeCompactionBatch(c)`` (the previous compaction and the
batches after it), then batch c's own entries, each through ``shouldRetain`` (the sink's
``retention`` option; the source keeps everything), each as compact JSON after a ``\\n``, no
trailing newline. Batch c's own entries exist only in ``c.compact`` itself, so they are taken
from a plain file ``c``. Spark never reads a plain ``c`` at a compaction batch (``batchIdToPath``
names ``c.compact``) and deletes it with the other expired files later. Such a file appears when
the compact interval changes before the log has a compaction: restarted with the new interval,
Spark reads its latest batch c as ``c.compact`` and fails ("File .../c.compact does not exist",
observed with PySpark 4.3 on a file source log); once ``c.compact`` is written, the query goes
on. The write is write-once unless the existing ``c.compact`` is unreadable, which the plan says.

Both parts work on the log's own storage (the sink's output directory, or the checkpoint for a
source log); the query-stopped precondition comes from the checkpoint's offsets and commits.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..compactible import (
    COMPACTIBLE_LOG_MAX_VERSION,
    FileEntry,
    SinkFileStatus,
    derive_compact_interval,
    expiry_threshold,
    is_compaction_batch,
    latest_compaction_batch_id,
    parse_sink_log_file,
    parse_source_log_file,
    plan_expired_files,
    valid_batches_before_compaction,
)
from ..errors import CheckpointError, CorruptFileError, UnsupportedVersionError
from ..fileinfo import FileInfo
from ..layout import COMPACT_FILE_SUFFIX, OFFSETS_DIR, parse_batch_id
from ..logdir import read_offset_seq
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, LogKind, files_read_for_latest, sink_log_location
from ..storage.checkpointstorage import MAX_LOG_FILE_BYTES, CheckpointStorage
from ..wording import format_size, plural
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import FileState, MaintenancePlan, PlannedDelete, PlannedWrite, Precondition, batch_ids_text, precondition
from .planning import PlanStart, delete_with_sidecars, join, list_batch_logs, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc

ACTION = "compact"
# spark.sql.streaming.minBatchesToRetain and file{Sink,Source}.log.cleanupDelay defaults.
DEFAULT_MIN_BATCHES_TO_RETAIN = 100
DEFAULT_CLEANUP_DELAY_SECONDS = 600.0
_HEADER = f"v{COMPACTIBLE_LOG_MAX_VERSION}".encode()


# --- the action: compact, then expire -------------------------------------------------------------


def plan_compaction(
    log_storage: CheckpointStorage,
    log_dir: str | None = None,
    *,
    checkpoint_storage: CheckpointStorage,
    kind: LogKind | None = None,
    compact_interval: int = DEFAULT_COMPACT_INTERVAL,
    retention_ms: int | None = None,
    min_batches_to_retain: int = DEFAULT_MIN_BATCHES_TO_RETAIN,
    cleanup_delay_seconds: float = DEFAULT_CLEANUP_DELAY_SECONDS,
    compact: bool = True,
    expire: bool = True,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """Plan the compaction file the log lacks (if any), then the expired files to delete.

    ``log_storage``/``log_dir``: where the log is: ``sources/<i>`` of the checkpoint, or a file
    sink's log (``log_dir`` None or "": ``_spark_metadata`` below ``log_storage``, or
    ``log_storage`` itself when it is rooted there). ``kind`` defaults to "source" for
    ``sources/<i>``, else "sink". ``compact_interval`` is the query's configured interval (Spark
    derives the effective one from the ``.compact`` files), ``retention_ms`` the sink's
    ``retention`` option (None: infinite). The offsets and commits of ``checkpoint_storage`` tell
    whether the query is stopped. LISTs: the log, offsets, commits; reads: the compaction file
    and its inputs when one is due, and for a source log the latest committed offsets file.
    """
    log_dir, kind = _resolve_log(log_storage, log_dir, kind)
    listings = _Listings(log_storage.list_dir(log_dir), *list_batch_logs(checkpoint_storage))
    common = {"log_dir": log_dir, "kind": kind, "compact_interval": compact_interval, "quiet_seconds": quiet_seconds}
    retain = {"min_batches_to_retain": min_batches_to_retain, "cleanup_delay_seconds": cleanup_delay_seconds}
    parts = []
    if compact:
        parts.append(_compaction_part(log_storage, listings, retention_ms, now, common))
    if expire:
        parts.append(_expiry_part(checkpoint_storage, listings, parts, now, {**common, **retain}))
    parameters = {**common, "retention_ms": retention_ms, **retain, "compact": compact, "expire": expire}
    return merge_plans(parts, parameters={**parameters, "log_url": log_storage.url}, now=now)


class _Listings(NamedTuple):
    """The LISTs a compaction plan judges: the log's directory, the checkpoint's offsets and commits."""

    log: list[FileInfo]
    offsets: Sequence[FileInfo]
    commits: Sequence[FileInfo]


def _compaction_part(
    log_storage: CheckpointStorage,
    listings: _Listings,
    retention_ms: int | None,
    now: float,
    common: Mapping[str, Any],
) -> MaintenancePlan:
    """The compaction part of :func:`plan_compaction`, after reading the compaction files already there."""
    log_dir, kind, interval = common["log_dir"], common["kind"], common["compact_interval"]
    unreadable = _read_compaction_files(log_storage, log_dir, listings.log, kind, interval)
    return compaction_plan_from_listings(*listings, retention_ms=retention_ms, unreadable=unreadable, now=now, **common)


def _expiry_part(
    checkpoint_storage: CheckpointStorage,
    listings: _Listings,
    earlier_parts: Iterable[MaintenancePlan],
    now: float,
    arguments: Mapping[str, Any],
) -> MaintenancePlan:
    """The expiry part of :func:`plan_compaction`; the files the ``earlier_parts`` write count as listed.

    ``arguments``: the log, kind, interval, quiet period and retention keywords of the expiry plan.
    """
    log, offsets, commits = listings
    needed_from = None
    if arguments["kind"] == "source":
        needed_from = _source_needed_from(checkpoint_storage, arguments["log_dir"], offsets, commits)
    listed = [*log, *_written_files(earlier_parts, now)]
    return expiry_plan_from_listings(listed, offsets, commits, source_needed_from=needed_from, now=now, **arguments)


def _written_files(parts: Iterable[MaintenancePlan], now: float) -> list[FileInfo]:
    """The files the ``parts`` write, as the listing will show them once written (for the expiry part)."""
    return [FileInfo(w.path.rpartition("/")[2], w.estimated_bytes, now, False) for p in parts for w in p.writes]


def merge_plans(parts: Sequence[MaintenancePlan], *, parameters: Mapping[str, Any], now: float) -> MaintenancePlan:
    """One plan of the writes and deletes of ``parts`` in order; a precondition named twice counts once."""
    preconditions: dict[str, Precondition] = {}
    for part in parts:
        for item in part.preconditions:
            preconditions.setdefault(item.name, item)
    return MaintenancePlan(
        ACTION,
        dict(parameters),
        writes=tuple(w for p in parts for w in p.writes),
        deletes=tuple(d for p in parts for d in p.deletes),
        preconditions=tuple(preconditions.values()),
        summary="; ".join(p.summary for p in parts) or "nothing asked: neither compact nor expire",
        planned_at=now,
        notes=tuple(n for p in parts for n in p.notes),
    )


def apply_compaction(storage: CheckpointStorage, plan: MaintenancePlan, on_step: StepHook | None = None) -> AppliedPlan:
    """Carry out a confirmed plan in ``storage``, the log's own storage (``parameters["log_url"]``).

    The compaction file is written first, the expired files are deleted after it.
    """
    kind = plan.parameters["kind"]
    retention_ms = plan.parameters.get("retention_ms")
    now_ms = int(plan.planned_at * 1000)

    def build(store: CheckpointStorage, write: PlannedWrite) -> bytes:
        return build_compaction_content(store, write, kind=kind, retention_ms=retention_ms, now_ms=now_ms)

    return apply_plan(storage, plan, build, on_step=on_step)


def _resolve_log(storage: CheckpointStorage, log_dir: str | None, kind: LogKind | None) -> tuple[str, LogKind]:
    if kind is None:
        kind = "source" if (log_dir or "").startswith("sources/") else "sink"
    _check_kind(kind)
    if kind == "sink" and not log_dir:
        log_dir = sink_log_location(storage)[0]
    return log_dir or "", kind


def _read_compaction_files(
    storage: CheckpointStorage, log_dir: str, listing: Sequence[FileInfo], kind: LogKind, compact_interval: int
) -> dict[str, str | None]:
    """Read the due compaction file and its inputs: name -> why it cannot be read (None: it can).

    An existing compaction file larger than a metadata file may be is taken as Spark wrote it
    (not read); one that cannot be read for a storage reason stops the planning, so that only
    damaged content is ever replaced.
    """
    target = compaction_target(listing, compact_interval)
    if target is None:
        return {}
    files = {info.name: info for info in listing if not info.is_dir}
    compact_name = f"{target[0]}{COMPACT_FILE_SUFFIX}"
    result = {}
    if compact_name in files and files[compact_name].size <= MAX_LOG_FILE_BYTES:
        result[compact_name] = _unreadable_reason(
            storage, join(log_dir, compact_name), kind, (CorruptFileError, UnsupportedVersionError)
        )
    for name in compaction_input_names(*target):
        if name in files:
            result[name] = _unreadable_reason(storage, join(log_dir, name), kind, (CheckpointError,))
    return result


# --- expire ---------------------------------------------------------------------------------------


def expiry_plan_from_listings(
    log_listing: Sequence[FileInfo],
    offsets: Sequence[FileInfo],
    commits: Sequence[FileInfo],
    *,
    log_dir: str,
    kind: LogKind,
    compact_interval: int = DEFAULT_COMPACT_INTERVAL,
    min_batches_to_retain: int = DEFAULT_MIN_BATCHES_TO_RETAIN,
    cleanup_delay_seconds: float = DEFAULT_CLEANUP_DELAY_SECONDS,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    source_needed_from: int | None = None,
) -> MaintenancePlan:
    """The pure core of the expiry part of ``plan_compaction``.

    ``source_needed_from``: for a source log, the first log batch a restart may read (the batch
    after the source's offset in the latest committed batch); no file from there on is deleted.
    """
    _check_kind(kind)
    _check_min_batches_to_retain(min_batches_to_retain)
    parameters = {
        "log_dir": log_dir,
        "kind": kind,
        "compact_interval": compact_interval,
        "min_batches_to_retain": min_batches_to_retain,
        "cleanup_delay_seconds": cleanup_delay_seconds,
    }
    start = start_plan(ACTION, parameters, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    batches = _log_batches(log_listing)
    if not batches:
        return start.nothing_to_do(f"nothing to expire: {log_dir or 'the log'} has no batch file")
    return _finish_expiry(start, log_listing, batches, source_needed_from)


def _finish_expiry(
    start: PlanStart, log_listing: Sequence[FileInfo], batches: Mapping[int, FileInfo], source_needed_from: int | None
) -> MaintenancePlan:
    """The plan that deletes the files of the log that Spark's deleteExpiredLog would delete."""
    log_dir = start.parameters["log_dir"]
    compact_interval = start.parameters["compact_interval"]
    retain = {key: start.parameters[key] for key in ("min_batches_to_retain", "cleanup_delay_seconds")}
    interval = derive_compact_interval(_compact_ids(log_listing), compact_interval)
    expired = plan_expired_files(max(batches), interval=interval, files=log_listing, now=start.now, **retain)
    deletes = _expiry_deletes(log_dir, log_listing, expired)
    retention = _expiry_retention(log_listing, expired, compact_interval, source_needed_from)
    return start.finish(
        deletes=deletes,
        preconditions=(retention,),
        summary=_expiry_summary(log_dir, deletes, batches, interval=interval, **retain),
        notes=(f"compact interval {interval} (derived from the .compact files and the configured {compact_interval})",),
    )


def _source_needed_from(
    checkpoint: CheckpointStorage, log_dir: str, offsets: Sequence[FileInfo], commits: Sequence[FileInfo]
) -> int:
    """The first source-log batch the next run reads: after this source's last committed offset."""
    committed = [b for b in (parse_batch_id(i.name) for i in commits if not i.is_dir) if b is not None]
    offset_ids = {b for b in (parse_batch_id(i.name) for i in offsets if not i.is_dir) if b is not None}
    if not committed or max(committed) not in offset_ids:
        return 0
    index = int(log_dir.rstrip("/").rpartition("/")[2])
    offset_seq = read_offset_seq(checkpoint, max(committed))
    raw = offset_seq.offsets[index] if index < len(offset_seq.offsets) else None
    try:
        log_offset = json.loads(raw).get("logOffset") if raw else None
    except (ValueError, AttributeError):
        raise CorruptFileError(
            f"{OFFSETS_DIR}/{max(committed)}",
            f'the offset of source {index} is not a file source\'s {{"logOffset": n}}',
        ) from None
    return 0 if not isinstance(log_offset, int) else log_offset + 1


def _expiry_deletes(log_dir: str, listing: Sequence[FileInfo], expired: Iterable[str]) -> tuple[PlannedDelete, ...]:
    files = {info.name: info for info in listing}
    ordered = sorted(expired, key=lambda name: (parse_batch_id(name, compactible=True), name))
    deletes = []
    for name in ordered:
        reason = "older than the compaction the retained batches are read through"
        deletes += delete_with_sidecars(log_dir, name, files, reason, sidecar_reason=f"checksum of {name}")
    return tuple(deletes)


def _expiry_retention(
    listing: Sequence[FileInfo], expired: Collection[str], compact_interval: int, needed_from: int | None
) -> Precondition:
    """Every file a reader of the latest batch opens stays; for a source, every batch a restart reads."""
    before = files_read_for_latest(_log_batches(listing), compact_interval)
    lost = _lost_to_latest_reader(listing, expired, compact_interval, before)
    if lost is not None:
        return precondition("retention", False, f"a reader of the latest batch would no longer find {', '.join(lost)}")
    needed = _needed_by_next_run(expired, needed_from)
    if needed:
        return precondition(
            "retention",
            False,
            f"the next run of the query reads source log batches from {needed_from} on: {', '.join(needed)} must stay",
        )
    shown = ", ".join(before) if len(before) <= 6 else f"{before[0]} .. {before[-1]}"
    return precondition("retention", True, f"the files a reader of the latest batch opens stay: {shown}")


def _lost_to_latest_reader(
    listing: Sequence[FileInfo], expired: Collection[str], compact_interval: int, before: list[str]
) -> list[str] | None:
    """The files a reader of the latest batch opens (``before``) that it would no longer find without the
    ``expired`` ones; all of ``before`` when it would open other files. None: it loses nothing."""
    present_before = {info.name for info in listing}
    remaining = [info for info in listing if info.name not in set(expired)]
    present_after = {info.name for info in remaining}
    lost = [name for name in before if name in present_before and name not in present_after]
    if lost or files_read_for_latest(_log_batches(remaining), compact_interval) != before:
        return lost or before
    return None


def _needed_by_next_run(expired: Collection[str], needed_from: int | None) -> list[str]:
    """The ``expired`` files of batches from ``needed_from`` on (none when no batch is needed), in order."""
    if needed_from is None:
        return []
    return sorted(name for name in expired if parse_batch_id(name, compactible=True) >= needed_from)


def _expiry_summary(
    log_dir: str,
    deletes: Sequence[PlannedDelete],
    batches: Mapping[int, FileInfo],
    *,
    interval: int,
    min_batches_to_retain: int,
    cleanup_delay_seconds: float,
) -> str:
    where = log_dir or "the log"
    ids = sorted({parse_batch_id(d.path.rpartition("/")[2], compactible=True) for d in deletes} - {None})
    if ids:
        freed = format_size(sum(d.size for d in deletes))
        return f"expire {batch_ids_text(ids)} of {where}: {plural(len(deletes), 'file')}, {freed}"
    oldest, latest = min(batches), max(batches)
    threshold = expiry_threshold(latest, interval=interval, min_batches_to_retain=min_batches_to_retain)
    if threshold is not None and oldest < threshold:
        return (
            f"nothing to expire in {where}: the files before compaction batch {threshold} were modified less than "
            f"{cleanup_delay_seconds:.0f} s (the cleanup delay) ago"
        )
    return explain_nothing_to_expire(
        where, latest, oldest=oldest, interval=interval, min_batches_to_retain=min_batches_to_retain
    )


def explain_nothing_to_expire(
    where: str, latest: int, *, oldest: int | None, interval: int, min_batches_to_retain: int
) -> str:
    """Say why deleteExpiredLog after ``latest`` expires no file of a log whose oldest batch is ``oldest``,
    and which min_batches_to_retain would expire some (when ``oldest`` is known)."""
    threshold = expiry_threshold(latest, interval=interval, min_batches_to_retain=min_batches_to_retain)
    if threshold is None:
        why = (
            f"Spark expires files only from batch {interval + min_batches_to_retain - 1} on "
            f"(compact interval {interval}, {plural(min_batches_to_retain, 'batch', 'batches')} to retain) "
            f"and the log is at batch {latest}"
        )
    else:
        why = (
            f"no file is older than compaction batch {threshold}, which the oldest retained batch "
            f"({latest + 1 - min_batches_to_retain}) is read through"
        )
    fewer = None if oldest is None else _retention_that_expires(latest, oldest, interval, min_batches_to_retain)
    change = f"; retaining {fewer} or fewer would expire from batch {oldest}" if fewer else ""
    return f"nothing to expire in {where}: {why}{change}"


def _retention_that_expires(latest: int, oldest: int, interval: int, min_batches_to_retain: int) -> int | None:
    """The largest min_batches_to_retain below the given one that expires the file of batch ``oldest``."""
    for fewer in range(min_batches_to_retain - 1, 0, -1):
        threshold = expiry_threshold(latest, interval=interval, min_batches_to_retain=fewer)
        if threshold is not None and threshold > oldest:
            return fewer
    return None


# --- compact --------------------------------------------------------------------------------------


def compaction_target(listing: Sequence[FileInfo], compact_interval: int) -> tuple[int, int] | None:
    """(latest compaction batch id, interval) for the log's latest batch; None before the first one."""
    batches = _log_batches(listing)
    if not batches:
        return None
    interval = derive_compact_interval(_compact_ids(listing), compact_interval)
    target = latest_compaction_batch_id(max(batches), interval)
    return None if target is None else (target, interval)


def compaction_input_names(target: int, interval: int) -> list[str]:
    """The files ``target.compact`` is built from, in order.

    Those of getValidBatchesBeforeCompactionBatch, then the plain file ``target``.
    """
    before = [_batch_file_name(batch_id, interval) for batch_id in valid_batches_before_compaction(target, interval)]
    return [*before, str(target)]


def compaction_plan_from_listings(
    log_listing: Sequence[FileInfo],
    offsets: Sequence[FileInfo],
    commits: Sequence[FileInfo],
    *,
    log_dir: str,
    kind: LogKind,
    compact_interval: int = DEFAULT_COMPACT_INTERVAL,
    retention_ms: int | None = None,
    unreadable: Mapping[str, str | None] | None = None,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """The pure core of the compaction part of ``plan_compaction``.

    ``unreadable`` maps each file of the log that was read to why it cannot be read (None: it
    can). A file present in the listing but absent from it counts as readable.
    """
    _check_kind(kind)
    _check_retention(retention_ms)
    unreadable = unreadable or {}
    parameters = {"log_dir": log_dir, "kind": kind, "compact_interval": compact_interval, "retention_ms": retention_ms}
    start = start_plan(ACTION, parameters, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    target = compaction_target(log_listing, compact_interval)
    if target is None:
        first = compact_interval - 1
        return start.nothing_to_do(
            f"nothing to compact: {log_dir or 'the log'} has no compaction batch yet (the first is batch {first})"
        )
    return _compact_unless_readable(start, log_listing, target, unreadable)


def _compact_unless_readable(
    start: PlanStart, log_listing: Sequence[FileInfo], target: tuple[int, int], unreadable: Mapping[str, str | None]
) -> MaintenancePlan:
    """Nothing to do when ``target``'s compaction file is present and readable, else the plan that writes it."""
    files = {info.name: info for info in log_listing if not info.is_dir}
    compact_name = f"{target[0]}{COMPACT_FILE_SUFFIX}"
    broken = unreadable.get(compact_name) if compact_name in files else None
    if compact_name in files and broken is None:
        where = join(start.parameters["log_dir"], compact_name)
        return start.nothing_to_do(f"nothing to compact: {where} is present and readable")
    return _finish_compaction(start, log_listing, files, target, broken, unreadable)


def _finish_compaction(
    start: PlanStart,
    log_listing: Sequence[FileInfo],
    files: Mapping[str, FileInfo],
    target: tuple[int, int],
    broken: str | None,
    unreadable: Mapping[str, str | None],
) -> MaintenancePlan:
    """The plan that writes ``target``'s compaction file (``broken``: why the existing one is unreadable)."""
    log_dir = start.parameters["log_dir"]
    compact_interval = start.parameters["compact_interval"]
    batch_id, interval = target
    inputs = compaction_input_names(batch_id, interval)
    write = _compaction_write(log_dir, files, inputs, target, broken)
    return start.finish(
        writes=(write,),
        preconditions=(
            _inputs_readable(log_dir, inputs, files, unreadable),
            _interval_kept(log_listing, batch_id, interval, compact_interval),
            *_replaces_unreadable(write, broken),
        ),
        summary=f"write {write.path} from {', '.join(inputs)} (about {format_size(write.estimated_bytes)})",
        notes=(f"batch {batch_id}'s own entries are taken from its plain file {join(log_dir, str(batch_id))}",),
    )


def _compaction_write(
    log_dir: str, files: Mapping[str, FileInfo], inputs: Sequence[str], target: tuple[int, int], broken: str | None
) -> PlannedWrite:
    """The write of ``target``'s compaction file from the ``inputs`` present.

    ``broken`` says why the existing compaction file cannot be read (None: there is none).
    """
    batch_id, interval = target
    present = [name for name in inputs if name in files]
    return PlannedWrite(
        path=join(log_dir, f"{batch_id}{COMPACT_FILE_SUFFIX}"),
        inputs=tuple(FileState(join(log_dir, name), files[name].size) for name in present),
        estimated_bytes=len(_HEADER) + sum(max(files[name].size - len(_HEADER), 0) for name in present),
        reason=f"compaction batch {batch_id} (interval {interval}) "
        + ("has no compaction file" if broken is None else f"has an unreadable compaction file ({broken})"),
        overwrite=broken is not None,
        hadoop_crc=directory_uses_hadoop_crc(files),
    )


def _replaces_unreadable(write: PlannedWrite, broken: str | None) -> tuple[Precondition, ...]:
    """The precondition an overwrite carries (always met), so that whoever confirms sees which file it replaces."""
    if broken is None:
        return ()
    return (precondition("replaces-unreadable-file", True, f"{write.path} cannot be read ({broken}) and is replaced"),)


def _inputs_readable(
    log_dir: str, inputs: Sequence[str], files: Mapping[str, FileInfo], unreadable: Mapping[str, str | None]
) -> Precondition:
    problems = []
    for name in inputs:
        if name not in files:
            problems.append(f"{join(log_dir, name)} is missing")
        elif unreadable.get(name):
            problems.append(f"{join(log_dir, name)}: {unreadable[name]}")
    if problems:
        return precondition("inputs-readable", False, "cannot rebuild exactly: " + "; ".join(problems))
    return precondition("inputs-readable", True, f"all {len(inputs)} input files are present and readable")


def _interval_kept(listing: Sequence[FileInfo], batch_id: int, interval: int, compact_interval: int) -> Precondition:
    """With the new file in place, Spark must derive the same interval (else it reads other files)."""
    after = derive_compact_interval([*_compact_ids(listing), batch_id], compact_interval)
    if after != interval:
        return precondition(
            "compact-interval", False, f"with {batch_id}.compact Spark would derive interval {after}, not {interval}"
        )
    return precondition("compact-interval", True, f"Spark derives interval {interval} before and after")


def build_compaction_content(
    storage: CheckpointStorage, write: PlannedWrite, *, kind: LogKind, retention_ms: int | None = None, now_ms: int = 0
) -> bytes:
    """Spark's compact: ``v1``, then ``\\n`` + JSON of every retained entry of the inputs, in order."""
    parse = parse_sink_log_file if kind == "sink" else parse_source_log_file
    lines = [_HEADER]
    for state in write.inputs:
        for entry in parse(storage.read_bytes(state.path), source=state.path):
            if _should_retain(entry, retention_ms, now_ms):
                lines.append(entry_json(entry))
    return b"\n".join(lines)


def entry_json(entry: SinkFileStatus | FileEntry) -> bytes:
    """An entry as json4s writes it: compact, fields in the case class's order."""
    if isinstance(entry, SinkFileStatus):
        fields: dict[str, Any] = {
            "path": entry.path,
            "size": entry.size,
            "isDir": entry.is_dir,
            "modificationTime": entry.modification_time,
            "blockReplication": entry.block_replication,
            "blockSize": entry.block_size,
            "action": entry.action,
        }
    else:
        fields = {"path": entry.path, "timestamp": entry.timestamp, "batchId": entry.batch_id}
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _should_retain(entry: SinkFileStatus | FileEntry, retention_ms: int | None, now_ms: int) -> bool:
    """FileStreamSinkLog.shouldRetain; FileStreamSourceLog keeps every entry."""
    if retention_ms is None or not isinstance(entry, SinkFileStatus):
        return True
    return now_ms - entry.modification_time <= retention_ms


# --- shared ---------------------------------------------------------------------------------------


def _unreadable_reason(
    storage: CheckpointStorage, relpath: str, kind: LogKind, errors: tuple[type[CheckpointError], ...]
) -> str | None:
    parse = parse_sink_log_file if kind == "sink" else parse_source_log_file
    try:
        parse(storage.read_bytes(relpath), source=relpath)
    except errors as error:
        return str(error)
    return None


def _log_batches(listing: Iterable[FileInfo]) -> dict[int, FileInfo]:
    """Batch id -> file; where both ``N`` and ``N.compact`` exist, the compaction file (what Spark reads)."""
    batches: dict[int, FileInfo] = {}
    for info in listing:
        batch_id = None if info.is_dir else parse_batch_id(info.name, compactible=True)
        if batch_id is not None and (batch_id not in batches or info.name.endswith(COMPACT_FILE_SUFFIX)):
            batches[batch_id] = info
    return batches


def _compact_ids(listing: Iterable[FileInfo]) -> list[int]:
    return [batch_id for batch_id, info in _log_batches(listing).items() if info.name.endswith(COMPACT_FILE_SUFFIX)]


def _batch_file_name(batch_id: int, interval: int) -> str:
    return f"{batch_id}{COMPACT_FILE_SUFFIX}" if is_compaction_batch(batch_id, interval) else str(batch_id)


def _check_kind(kind: str) -> None:
    if kind not in ("source", "sink"):
        raise ValueError(f"kind must be 'source' or 'sink', got {kind!r}")


def _check_min_batches_to_retain(min_batches_to_retain: int) -> None:
    if min_batches_to_retain < 1:
        raise ValueError(f"min_batches_to_retain must be at least 1, got {min_batches_to_retain}")


def _check_retention(retention_ms: int | None) -> None:
    if retention_ms is not None and retention_ms < 0:
        raise ValueError(f"retention_ms must be >= 0, got {retention_ms}")
