"""Compact (``compaction_plan_from_listings``) writes the compaction file ``c.compact`` of the latest
compaction batch c when it is missing or unreadable, the way Spark's ``compact`` does: ``v1``,
then the entries of ``getValidBatchesBeforeCompactionBatch(c)`` (the previous compaction and the
batches after it), then batch c's own entries, each through ``shouldRetain`` (the sink's
``retention`` option; the source keeps everything), each as compact JSON after a ``\n``, no
trailing newline. Batch c's own entries exist only in ``c.compact`` itself, so they are taken
from a plain file ``c``. Spark never reads a plain ``c`` at a compaction batch (``batchIdToPath``
names ``c.compact``) and deletes it with the other expired files later. Such a file appears when
the compact interval changes before the log has a compaction: restarted with the new interval,
Spark reads its latest batch c as ``c.compact`` and fails ("File .../c.compact does not exist",
observed with PySpark 4.3 on a file source log); once ``c.compact`` is written, the query goes
on. The write is write-once unless the existing ``c.compact`` is unreadable, which the plan says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..compactible import (
    COMPACTIBLE_LOG_MAX_VERSION,
    FileEntry,
    SinkFileStatus,
    derive_compact_interval,
    latest_compaction_batch_id,
    parse_sink_log_file,
    parse_source_log_file,
    valid_batches_before_compaction,
)
from ..fileinfo import FileInfo
from ..layout import COMPACT_FILE_SUFFIX
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, LogKind
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size
from .compactionlogs import ACTION, batch_file_name, check_kind, check_retention, compact_ids, log_batches
from .plan import FileState, MaintenancePlan, PlannedWrite, Precondition, precondition
from .planning import PlanStart, join, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc

_HEADER = f"v{COMPACTIBLE_LOG_MAX_VERSION}".encode()


def compaction_target(listing: Sequence[FileInfo], compact_interval: int) -> tuple[int, int] | None:
    """(latest compaction batch id, interval) for the log's latest batch; None before the first one."""
    batches = log_batches(listing)
    if not batches:
        return None
    interval = derive_compact_interval(compact_ids(listing), compact_interval)
    target = latest_compaction_batch_id(max(batches), interval)
    return None if target is None else (target, interval)


def compaction_input_names(target: int, interval: int) -> list[str]:
    """The files ``target.compact`` is built from, in order.

    Those of getValidBatchesBeforeCompactionBatch, then the plain file ``target``.
    """
    before = [batch_file_name(batch_id, interval) for batch_id in valid_batches_before_compaction(target, interval)]
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
    check_kind(kind)
    check_retention(retention_ms)
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
    after = derive_compact_interval([*compact_ids(listing), batch_id], compact_interval)
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
