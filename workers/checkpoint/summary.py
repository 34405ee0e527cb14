"""A one-pass overview of a checkpoint's metadata logs (``inspect_checkpoint --json``).

Reads ``metadata``, every ``offsets/<N>`` and every ``commits/<N>``, and the compactible logs:
the ``sources/<i>`` log of each file source (found from the latest offsets) and, when given, a
file sink's ``_spark_metadata`` log, which lives beside the sink's output, not in the
checkpoint. A file that cannot be
read or parsed becomes an entry of ``errors`` and the walk goes on, so one corrupt
``offsets/3`` does not hide ``offsets/4``. Absence is not an error: a checkpoint without a
``metadata`` file has no query id yet, and a batch without a commit file is uncommitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import CheckpointError
from .layout import COMMITS_DIR, METADATA_FILE, OFFSETS_DIR
from .logdir import find_stream_metadata, list_batch_ids, read_commit, read_offset_seq
from .metadatalog import (
    DEFAULT_COMPACT_INTERVAL,
    MetadataLogSummary,
    file_source_log_dirs,
    read_metadata_log,
    sink_log_location,
)
from .offsets import offset_as_json

if TYPE_CHECKING:
    from .storage.checkpointstorage import CheckpointStorage

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class FileIssue:
    """A file the summary could not read or parse: its relative path and the error message."""

    path: str
    error: str


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """One batch of the offset log.

    ``timestamp_ms``/``watermark_ms`` are None when the offsets file has no metadata line;
    ``sources`` holds each offset as a JSON value (the raw string when it is not valid JSON,
    None for a source without an offset).
    """

    batch_id: int
    timestamp_ms: int | None
    watermark_ms: int | None
    is_committed: bool
    sources: tuple[Any, ...]

    def as_json(self) -> dict[str, Any]:
        """Return the batch as an entry of the summary document's ``batches``."""
        return {
            "batch_id": self.batch_id,
            "timestamp_ms": self.timestamp_ms,
            "watermark_ms": self.watermark_ms,
            "committed": self.is_committed,
            "sources": list(self.sources),
        }


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    """What the metadata logs of a checkpoint say, plus the files that could not be read.

    ``offset_ids`` and ``commit_ids`` are the batch ids listed on storage (sorted), including
    those whose file turned out to be corrupt; ``batches`` has only the parsed offsets files.
    """

    query_id: str | None
    offset_ids: tuple[int, ...]
    commit_ids: tuple[int, ...]
    batches: tuple[BatchSummary, ...]
    errors: tuple[FileIssue, ...]
    metadata_logs: tuple[MetadataLogSummary, ...] = ()

    @property
    def uncommitted(self) -> tuple[int, ...]:
        """Batch ids with an offsets file but no commit file, sorted."""
        committed = set(self.commit_ids)
        return tuple(batch_id for batch_id in self.offset_ids if batch_id not in committed)

    def as_json(self) -> dict[str, Any]:
        """Return the JSON-ready document that ``inspect_checkpoint --json`` prints."""
        return {
            "query_id": self.query_id,
            "offsets": _id_range(self.offset_ids),
            "commits": _id_range(self.commit_ids),
            "uncommitted": list(self.uncommitted),
            "batches": [batch.as_json() for batch in self.batches],
            "metadata_logs": [log.as_json() for log in self.metadata_logs],
            "errors": [{"path": issue.path, "error": issue.error} for issue in self.errors],
        }


def summarize_checkpoint(
    storage: CheckpointStorage,
    *,
    sink_log: CheckpointStorage | None = None,
    default_compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> CheckpointSummary:
    """Read the metadata, offset, commit and file-source logs of a checkpoint, recording errors per file.

    ``sink_log`` is a file sink's output directory or its ``_spark_metadata`` directory; its
    ``metadata_logs`` entry carries the log's full URL as ``path`` (the others are relative).
    """
    issues: list[FileIssue] = []
    query_id = _find_query_id(storage, issues)
    offset_ids = _list_ids(storage, OFFSETS_DIR, issues)
    commit_ids = _list_ids(storage, COMMITS_DIR, issues)
    parsed = _read_batches(storage, offset_ids, commit_ids, issues)
    logs = _read_metadata_logs(storage, parsed, sink_log, default_compact_interval, issues)
    return CheckpointSummary(
        query_id=query_id,
        offset_ids=tuple(offset_ids),
        commit_ids=tuple(commit_ids),
        batches=tuple(parsed),
        errors=tuple(issues),
        metadata_logs=tuple(log for log in logs if log is not None),
    )


def _read_batches(
    storage: CheckpointStorage, offset_ids: Sequence[int], commit_ids: Sequence[int], issues: list[FileIssue]
) -> list[BatchSummary]:
    """The batches whose offsets parse, in order; every commit is read too (its errors are recorded)."""
    committed = set(commit_ids)
    batches = [_summarize_batch(storage, batch_id, batch_id in committed, issues) for batch_id in offset_ids]
    for batch_id in commit_ids:
        _record_errors(issues, f"{COMMITS_DIR}/{batch_id}", read_commit, storage, batch_id)
    return [batch for batch in batches if batch is not None]


def _read_metadata_logs(
    storage: CheckpointStorage,
    batches: Sequence[BatchSummary],
    sink_log: CheckpointStorage | None,
    interval: int,
    issues: list[FileIssue],
) -> list[MetadataLogSummary | None]:
    """The logs of the file sources the latest batch reads, then the sink's log (None: one that failed)."""
    source_logs = file_source_log_dirs(batches[-1].sources) if batches else []
    logs = [_record_errors(issues, dirname, _read_log, storage, dirname, "source", interval) for dirname in source_logs]
    if sink_log is not None:
        logs.append(_read_sink_log(sink_log, interval, issues))
    return logs


def _read_log(storage: CheckpointStorage, dirname: str, kind: str, interval: int) -> MetadataLogSummary:
    return read_metadata_log(storage, dirname, kind=kind, default_interval=interval)  # type: ignore[arg-type]


def _read_sink_log(sink_log: CheckpointStorage, interval: int, issues: list[FileIssue]) -> MetadataLogSummary | None:
    """Read the sink log at ``sink_log`` (the output dir or the log dir itself), named by its URL."""
    dirname, url = sink_log_location(sink_log)
    summary = _record_errors(issues, url, _read_log, sink_log, dirname, "sink", interval)
    if summary is not None and summary.latest_batch is None:
        issues.append(FileIssue(path=url, error=f"{url}: no file sink log batch files here"))
    return None if summary is None else replace(summary, path=url)


def _record_errors(issues: list[FileIssue], path: str, read: Callable[..., _T], *args: Any) -> _T | None:
    """Call ``read(*args)``; on a CheckpointError record it under ``path`` and return None."""
    try:
        return read(*args)
    except CheckpointError as exc:
        issues.append(FileIssue(path=path, error=str(exc)))
        return None


def _find_query_id(storage: CheckpointStorage, issues: list[FileIssue]) -> str | None:
    metadata = _record_errors(issues, METADATA_FILE, find_stream_metadata, storage)
    return None if metadata is None else metadata.id


def _list_ids(storage: CheckpointStorage, dirname: str, issues: list[FileIssue]) -> list[int]:
    ids = _record_errors(issues, dirname, list_batch_ids, storage, dirname)
    return [] if ids is None else ids


def _summarize_batch(
    storage: CheckpointStorage, batch_id: int, is_committed: bool, issues: list[FileIssue]
) -> BatchSummary | None:
    offset_seq = _record_errors(issues, f"{OFFSETS_DIR}/{batch_id}", read_offset_seq, storage, batch_id)
    if offset_seq is None:
        return None
    metadata = offset_seq.metadata
    return BatchSummary(
        batch_id=batch_id,
        timestamp_ms=None if metadata is None else metadata.batch_timestamp_ms,
        watermark_ms=None if metadata is None else metadata.batch_watermark_ms,
        is_committed=is_committed,
        sources=tuple(offset_as_json(offset) for offset in offset_seq.offsets),
    )


def _id_range(batch_ids: tuple[int, ...]) -> dict[str, int | None]:
    """Return first, latest and count of sorted batch ids, as in the summary document."""
    return {
        "first": batch_ids[0] if batch_ids else None,
        "latest": batch_ids[-1] if batch_ids else None,
        "count": len(batch_ids),
    }
