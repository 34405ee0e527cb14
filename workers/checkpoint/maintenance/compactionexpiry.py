"""Expire (``expiry_plan_from_listings``) deletes what Spark's ``deleteExpiredLog`` would delete right now,
after the latest batch of the log: every file older than the compaction that the oldest retained
batch is read through, if its mtime is older than the cleanup delay (``compactible.
plan_expired_files``). It is for logs Spark did not clean (``fileSink.log.deletion`` /
``fileSource.log.deletion`` false, or the query stopped first). Oldest first, sidecars before
their file, so what remains is always the newest part of the log, which is all a reader reads.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence

from ..compactible import (
    derive_compact_interval,
    expiry_threshold,
    plan_expired_files,
)
from ..errors import CorruptFileError
from ..fileinfo import FileInfo
from ..layout import OFFSETS_DIR, parse_batch_id
from ..logdir import read_offset_seq
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, LogKind, files_read_for_latest
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size, plural
from .compactionlogs import (
    ACTION,
    DEFAULT_CLEANUP_DELAY_SECONDS,
    DEFAULT_MIN_BATCHES_TO_RETAIN,
    check_kind,
    check_min_batches_to_retain,
    compact_ids,
    log_batches,
)
from .plan import MaintenancePlan, PlannedDelete, Precondition, batch_ids_text, precondition
from .planning import PlanStart, delete_with_sidecars, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS


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
    check_kind(kind)
    check_min_batches_to_retain(min_batches_to_retain)
    parameters = {
        "log_dir": log_dir,
        "kind": kind,
        "compact_interval": compact_interval,
        "min_batches_to_retain": min_batches_to_retain,
        "cleanup_delay_seconds": cleanup_delay_seconds,
    }
    start = start_plan(ACTION, parameters, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    batches = log_batches(log_listing)
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
    interval = derive_compact_interval(compact_ids(log_listing), compact_interval)
    expired = plan_expired_files(max(batches), interval=interval, files=log_listing, now=start.now, **retain)
    deletes = _expiry_deletes(log_dir, log_listing, expired)
    retention = _expiry_retention(log_listing, expired, compact_interval, source_needed_from)
    return start.finish(
        deletes=deletes,
        preconditions=(retention,),
        summary=_expiry_summary(log_dir, deletes, batches, interval=interval, **retain),
        notes=(f"compact interval {interval} (derived from the .compact files and the configured {compact_interval})",),
    )


def source_needed_from(
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
    before = files_read_for_latest(log_batches(listing), compact_interval)
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
    if lost or files_read_for_latest(log_batches(remaining), compact_interval) != before:
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
