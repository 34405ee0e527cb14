"""What the expiry and the compaction of a compactible log share: its batch files by id, its
compaction ids, the name of a batch's file, why a file is unreadable, and the checks of their
parameters.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..compactible import (
    is_compaction_batch,
    parse_sink_log_file,
    parse_source_log_file,
)
from ..errors import CheckpointError
from ..fileinfo import FileInfo
from ..layout import COMPACT_FILE_SUFFIX, parse_batch_id
from ..metadatalog import LogKind
from ..storage.checkpointstorage import CheckpointStorage

ACTION = "compact"
# spark.sql.streaming.minBatchesToRetain and file{Sink,Source}.log.cleanupDelay defaults.
DEFAULT_MIN_BATCHES_TO_RETAIN = 100
DEFAULT_CLEANUP_DELAY_SECONDS = 600.0


def unreadable_reason(
    storage: CheckpointStorage, relpath: str, kind: LogKind, errors: tuple[type[CheckpointError], ...]
) -> str | None:
    parse = parse_sink_log_file if kind == "sink" else parse_source_log_file
    try:
        parse(storage.read_bytes(relpath), source=relpath)
    except errors as error:
        return str(error)
    return None


def log_batches(listing: Iterable[FileInfo]) -> dict[int, FileInfo]:
    """Batch id -> file; where both ``N`` and ``N.compact`` exist, the compaction file (what Spark reads)."""
    batches: dict[int, FileInfo] = {}
    for info in listing:
        batch_id = None if info.is_dir else parse_batch_id(info.name, compactible=True)
        if batch_id is not None and (batch_id not in batches or info.name.endswith(COMPACT_FILE_SUFFIX)):
            batches[batch_id] = info
    return batches


def compact_ids(listing: Iterable[FileInfo]) -> list[int]:
    return [batch_id for batch_id, info in log_batches(listing).items() if info.name.endswith(COMPACT_FILE_SUFFIX)]


def batch_file_name(batch_id: int, interval: int) -> str:
    return f"{batch_id}{COMPACT_FILE_SUFFIX}" if is_compaction_batch(batch_id, interval) else str(batch_id)


def check_kind(kind: str) -> None:
    if kind not in ("source", "sink"):
        raise ValueError(f"kind must be 'source' or 'sink', got {kind!r}")


def check_min_batches_to_retain(min_batches_to_retain: int) -> None:
    if min_batches_to_retain < 1:
        raise ValueError(f"min_batches_to_retain must be at least 1, got {min_batches_to_retain}")


def check_retention(retention_ms: int | None) -> None:
    if retention_ms is not None and retention_ms < 0:
        raise ValueError(f"retention_ms must be >= 0, got {retention_ms}")
