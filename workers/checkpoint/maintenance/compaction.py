"""Compact and expire the compactible metadata logs: a file source's ``sources/<i>`` and a file sink's
``_spark_metadata`` (CompactibleFileStreamLog, §5).

One action, ``plan_compaction`` / ``apply_compaction``: first the compaction file the log lacks,
then the expired files, so nothing is deleted before the file that replaces it exists.

Expire (``expiry_plan_from_listings``) is in compactionexpiry.py, compact
(``compaction_plan_from_listings``, ``build_compaction_content``) in compactionfile.py, what they
share in compactionlogs.py; each module says what its part does and why.

Both parts work on the log's own storage (the sink's output directory, or the checkpoint for a
source log); the query-stopped precondition comes from the checkpoint's offsets and commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import CheckpointError, CorruptFileError, UnsupportedVersionError
from ..fileinfo import FileInfo
from ..layout import COMPACT_FILE_SUFFIX
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, LogKind, sink_log_location
from ..storage.checkpointstorage import MAX_LOG_FILE_BYTES, CheckpointStorage
from .compactionexpiry import expiry_plan_from_listings, source_needed_from
from .compactionfile import (
    build_compaction_content,
    compaction_input_names,
    compaction_plan_from_listings,
    compaction_target,
)
from .compactionlogs import (
    ACTION,
    DEFAULT_CLEANUP_DELAY_SECONDS,
    DEFAULT_MIN_BATCHES_TO_RETAIN,
    check_kind,
    unreadable_reason,
)
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import MaintenancePlan, PlannedWrite, Precondition
from .planning import join, list_batch_logs
from .preconditions import DEFAULT_QUIET_SECONDS


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
        needed_from = source_needed_from(checkpoint_storage, arguments["log_dir"], offsets, commits)
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
    check_kind(kind)
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
        result[compact_name] = unreadable_reason(
            storage, join(log_dir, compact_name), kind, (CorruptFileError, UnsupportedVersionError)
        )
    for name in compaction_input_names(*target):
        if name in files:
            result[name] = unreadable_reason(storage, join(log_dir, name), kind, (CheckpointError,))
    return result
