"""Compactible file stream logs: the file sink's ``_spark_metadata/`` and the file source's ``sources/<i>/``.

Spark's CompactibleFileStreamLog (subclasses FileStreamSinkLog and FileStreamSourceLog) writes
batch N to ``N``, and every ``interval``-th batch to ``N.compact``, which repeats the entries of
all earlier valid batches. Each file is::

    v1\\n<entry JSON>\\n<entry JSON>...

with no trailing newline (Spark 2.x wrote one). An entry is a SinkFileStatus for the sink,
``{"path","size","isDir","modificationTime","blockReplication","blockSize","action"}``, and a
FileEntry for the source, ``{"path","timestamp","batchId"}``.

The rest of the module is the pure arithmetic of ``object CompactibleFileStreamLog`` (which
batches are compactions, which files a reader needs, the derived interval) and a plan of what
``deleteExpiredLog`` would delete. Nothing here opens or lists a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .layout import parse_batch_id
from .logfile import JsonSite, get_required_bool, get_required_long, get_required_str, parse_json_object, parse_log_file

if TYPE_CHECKING:
    # Annotations only: a plan takes a listing but never lists, so storage is not imported.
    from .fileinfo import FileInfo

# FileStreamSinkLog.VERSION and FileStreamSourceLog.VERSION (unchanged from 2.1 to 4.x).
COMPACTIBLE_LOG_MAX_VERSION = 1
# FileStreamSinkLog.ADD_ACTION / DELETE_ACTION; "delete" exists only in Spark 2.x logs.
ADD_ACTION = "add"
DELETE_ACTION = "delete"


@dataclass(frozen=True, slots=True)
class SinkFileStatus:
    """One file written by the file sink (Spark's SinkFileStatus); times in epoch milliseconds."""

    path: str
    size: int
    is_dir: bool
    modification_time: int
    block_replication: int
    block_size: int
    action: str


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One input file the file source has seen (Spark's FileEntry); ``timestamp`` is its mtime in ms."""

    path: str
    timestamp: int
    batch_id: int


def parse_sink_log_file(data: bytes, *, source: str) -> tuple[SinkFileStatus, ...]:
    """Parse a FileStreamSinkLog file (``_spark_metadata/N`` or ``N.compact``)."""
    return tuple(_sink_file_status(obj, site) for obj, site in _iter_entries(data, source))


def parse_source_log_file(data: bytes, *, source: str) -> tuple[FileEntry, ...]:
    """Parse a FileStreamSourceLog file (``sources/<i>/N`` or ``N.compact``)."""
    return tuple(_file_entry(obj, site) for obj, site in _iter_entries(data, source))


def _iter_entries(data: bytes, source: str) -> Iterable[tuple[dict[str, Any], JsonSite]]:
    """Yield each entry line as a JSON object with its site (``line N``, N counted from 1)."""
    log = parse_log_file(data, source=source, max_version=COMPACTIBLE_LOG_MAX_VERSION)
    for index, line in enumerate(log.lines):
        site = JsonSite(source, f"line {index + 2}", log.offset_of(index))
        yield parse_json_object(line, site), site


def _sink_file_status(obj: dict[str, Any], site: JsonSite) -> SinkFileStatus:
    return SinkFileStatus(
        path=get_required_str(obj, "path", site),
        size=get_required_long(obj, "size", site),
        is_dir=get_required_bool(obj, "isDir", site),
        modification_time=get_required_long(obj, "modificationTime", site),
        block_replication=get_required_long(obj, "blockReplication", site),
        block_size=get_required_long(obj, "blockSize", site),
        action=get_required_str(obj, "action", site),
    )


def _file_entry(obj: dict[str, Any], site: JsonSite) -> FileEntry:
    return FileEntry(
        path=get_required_str(obj, "path", site),
        timestamp=get_required_long(obj, "timestamp", site),
        batch_id=get_required_long(obj, "batchId", site),
    )


def _check_interval(interval: int) -> None:
    if interval <= 0:
        raise ValueError(f"compact interval must be positive, got {interval}")


def is_compaction_batch(batch_id: int, interval: int) -> bool:
    """CompactibleFileStreamLog.isCompactionBatch: with interval 10 the compactions are 9, 19, 29..."""
    _check_interval(interval)
    return (batch_id + 1) % interval == 0


def valid_batches_before_compaction(compaction_batch_id: int, interval: int) -> list[int]:
    """getValidBatchesBeforeCompactionBatch: the batches a compaction merges, e.g. 19 -> 9..18.

    The first of them is the previous compaction file (except at the very start).
    """
    if not is_compaction_batch(compaction_batch_id, interval):
        raise ValueError(f"{compaction_batch_id} is not a compaction batch for interval {interval}")
    return list(range(max(0, compaction_batch_id - interval), compaction_batch_id))


def all_valid_batches(batch_id: int, interval: int) -> list[int]:
    """getAllValidBatches: the latest compaction at or before ``batch_id`` and every batch after it."""
    _check_interval(interval)
    if batch_id < 0:
        raise ValueError(f"batch_id must be non-negative, got {batch_id}")
    start = max(0, (batch_id + 1) // interval * interval - 1)
    return list(range(start, batch_id + 1))


def latest_compaction_batch_id(batch_id: int, interval: int) -> int | None:
    """The newest compaction batch at or before ``batch_id``; None before the first one."""
    _check_interval(interval)
    latest = (batch_id + 1) // interval * interval - 1
    return latest if latest >= 0 else None


def next_compaction_batch_id(batch_id: int, interval: int) -> int:
    """nextCompactionBatchId: the first compaction batch after ``batch_id``."""
    _check_interval(interval)
    return (batch_id + interval + 1) // interval * interval - 1


def derive_compact_interval(compact_batch_ids: list[int], default_interval: int) -> int:
    """The interval Spark's ``compactInterval`` lazy val uses, from the ``N.compact`` files present.

    Two or more: the gap between the latest two. Exactly one: deriveCompactInterval, because
    the query may have been started with another interval. None: the configured default.
    """
    _check_interval(default_interval)
    latest_first = sorted(set(compact_batch_ids), reverse=True)
    if len(latest_first) >= 2:
        return latest_first[0] - latest_first[1]
    if len(latest_first) == 1:
        return _derive_from_one_compaction(default_interval, latest_first[0])
    return default_interval


def _derive_from_one_compaction(default_interval: int, latest_compact_batch_id: int) -> int:
    """CompactibleFileStreamLog.deriveCompactInterval: a divisor of (c + 1) near the default."""
    batches = latest_compact_batch_id + 1
    if batches <= default_interval:
        return batches
    if default_interval < batches // 2:
        # The smallest divisor of `batches` that is at least the default, else `batches` itself.
        divisors = (i for i in range(default_interval, batches // 2 + 1) if batches % i == 0)
        return next(divisors, batches)
    return batches


def plan_expired_files(
    batch_id: int,
    *,
    interval: int,
    min_batches_to_retain: int,
    files: Sequence[FileInfo],
    now: float,
    cleanup_delay_seconds: float = 600.0,
) -> tuple[str, ...]:
    """Name the files deleteExpiredLog would delete right after batch ``batch_id`` was added.

    Spark 3.x/4.x: only when ``interval <= batch_id + 1 - min_batches_to_retain``; then every
    batch file older than the compaction that the oldest retained batch needs, whose mtime is at
    least ``cleanup_delay_seconds`` before ``now``. ``now`` and ``FileInfo.mtime`` are epoch
    seconds; ``files`` is the listing of the log directory.
    """
    min_compaction_batch_id = expiry_threshold(batch_id, interval=interval, min_batches_to_retain=min_batches_to_retain)
    if min_compaction_batch_id is None:
        return ()
    expired_at = now - cleanup_delay_seconds
    return tuple(info.name for info in files if _is_expired(info, min_compaction_batch_id, expired_at))


def expiry_threshold(batch_id: int, *, interval: int, min_batches_to_retain: int) -> int | None:
    """The minCompactionBatchId of deleteExpiredLog after ``batch_id``: files of older batches expire.

    None when Spark expires nothing yet (``interval > batch_id + 1 - min_batches_to_retain``).
    """
    _check_interval(interval)
    min_batch_id = batch_id + 1 - min_batches_to_retain
    if interval > min_batch_id:
        return None
    # The compaction the oldest retained batch is read through (getAllValidBatches).
    return min_batch_id - min_batch_id % interval - 1


def _is_expired(info: FileInfo, min_compaction_batch_id: int, expired_at: float) -> bool:
    file_batch_id = None if info.is_dir else parse_batch_id(info.name, compactible=True)
    if file_batch_id is None or file_batch_id >= min_compaction_batch_id:
        return False
    # A listing without an mtime cannot prove the file is old enough; keep it.
    return info.mtime is not None and info.mtime <= expired_at
