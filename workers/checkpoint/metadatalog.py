"""Reading a compactible file stream log through storage (CompactibleFileStreamLog.allFiles).

Layout of the directory (``<sink output>/_spark_metadata`` for FileStreamSinkLog,
``<checkpoint>/sources/<i>`` for FileStreamSourceLog)::

    N            entries added by batch N
    N.compact    every live entry up to batch N (a compaction batch)
    .N.crc       Hadoop checksums, ignored

One listing gives the batch ids, the ``.compact`` files and the derived compact interval; then
only the files ``all_valid_batches(latest, interval)`` names are read, as Spark's allFiles does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .compactible import (
    COMPACTIBLE_LOG_MAX_VERSION,
    DELETE_ACTION,
    FileEntry,
    SinkFileStatus,
    all_valid_batches,
    derive_compact_interval,
    is_compaction_batch,
    parse_sink_log_file,
    parse_source_log_file,
)
from .layout import COMPACT_FILE_SUFFIX, parse_batch_id

if TYPE_CHECKING:
    # Annotations only: the reader needs just the methods of CheckpointStorage.
    from .fileinfo import FileInfo
    from .storage.checkpointstorage import CheckpointStorage

LogKind = Literal["source", "sink"]

# spark.sql.streaming.fileSink.log.compactInterval / fileSource.log.compactInterval default.
DEFAULT_COMPACT_INTERVAL = 10
# FileStreamSink.metadataDir: the sink log's folder inside the sink's output directory.
SINK_LOG_DIR = "_spark_metadata"


@dataclass(frozen=True, slots=True)
class MetadataLogSummary:
    """What one compactible log holds now.

    ``latest_batch`` is None (and ``version`` None) when the directory has no batch file.
    ``live_entries`` counts the entries a reader of the log would get: the latest compaction
    plus the later batches (for the sink, minus files a Spark 2.x "delete" entry removed).
    ``compact_file_bytes`` is (batch id, size) of every ``.compact`` file still on storage, oldest
    first: Spark deletes expired ones, so a history of growth has to be kept by the caller.
    """

    path: str
    kind: LogKind
    version: int | None
    compact_interval: int
    latest_batch: int | None
    compact_batches: tuple[int, ...]
    live_entries: int
    latest_compact_bytes: int
    compact_file_bytes: tuple[tuple[int, int], ...] = ()

    def as_json(self) -> dict[str, Any]:
        """Return the entry of ``inspect_checkpoint --json``'s ``metadata_logs``."""
        return {
            "path": self.path,
            "kind": self.kind,
            "version": self.version,
            "compact_interval": self.compact_interval,
            "latest_batch": self.latest_batch,
            "compact_batches": list(self.compact_batches),
            "live_entries": self.live_entries,
            "latest_compact_bytes": self.latest_compact_bytes,
        }


def read_metadata_log(
    storage: CheckpointStorage,
    dirname: str,
    *,
    kind: LogKind,
    default_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> MetadataLogSummary:
    """Summarise the file source or file sink log in ``dirname`` (relative to the storage root).

    Raises MissingFileError when a file the latest batch needs is gone (Spark's allFiles fails
    the same way) and CorruptFileError / UnsupportedVersionError for a bad file.
    """
    if kind not in ("source", "sink"):
        raise ValueError(f"kind must be 'source' or 'sink', got {kind!r}")
    batches = log_batch_files(storage.list_dir(dirname))
    compacts = _compact_batches(batches)
    interval = derive_compact_interval(list(compacts), default_interval)
    latest = max(batches, default=None)
    live = 0 if latest is None else count_live_entries(storage, dirname, kind, latest, interval)
    return MetadataLogSummary(
        path=dirname,
        kind=kind,
        version=None if latest is None else COMPACTIBLE_LOG_MAX_VERSION,
        compact_interval=interval,
        latest_batch=latest,
        compact_batches=compacts,
        live_entries=live,
        latest_compact_bytes=batches[compacts[-1]].size if compacts else 0,
        compact_file_bytes=tuple((batch_id, batches[batch_id].size) for batch_id in compacts),
    )


def sink_log_location(storage: CheckpointStorage) -> tuple[str, str]:
    """Return (directory relative to ``storage``, full URL) of a sink log.

    ``storage`` may be rooted at the sink's output directory (the path a query writes to), at its
    ``_spark_metadata`` directory, or at a copy of that log under another name (a backup, a
    restored copy): a log is told by its files, not its folder's name. No storage call when the
    URL ends with ``_spark_metadata``; else one lookup, and a listing of the root when it has no
    ``_spark_metadata`` folder.
    """
    root = storage.url.rstrip("/")
    if root.endswith(f"/{SINK_LOG_DIR}"):
        return "", root
    child = storage.find_info(SINK_LOG_DIR)
    if (child is None or not child.is_dir) and holds_log_files(storage.list_dir("")):
        return "", root
    return SINK_LOG_DIR, f"{root}/{SINK_LOG_DIR}"


def holds_log_files(listing: Iterable[FileInfo]) -> bool:
    """Whether a directory's listing has a batch file of a compactible log (``N`` or ``N.compact``)."""
    return any(not info.is_dir and parse_batch_id(info.name, compactible=True) is not None for info in listing)


def file_source_log_dirs(offsets: Sequence[Any]) -> list[str]:
    """Return ``sources/<i>`` for each source whose offset is a file source's ``{"logOffset": n}``.

    ``offsets`` are one batch's source offsets parsed as JSON. Only a FileStreamSource keeps a
    compactible log in ``sources/<i>``; a Kafka or rate source keeps a one-file log of another
    format there, so the directory name alone cannot tell them apart.
    """
    return [
        f"sources/{index}"
        for index, offset in enumerate(offsets)
        if isinstance(offset, dict) and set(offset) == {"logOffset"}
    ]


def log_compact_interval(batches: dict[int, FileInfo], default_interval: int = DEFAULT_COMPACT_INTERVAL) -> int:
    """The interval Spark derives from the ``.compact`` files among ``batches`` (log_batch_files)."""
    return derive_compact_interval(list(_compact_batches(batches)), default_interval)


def files_read_for_latest(batches: dict[int, FileInfo], default_interval: int = DEFAULT_COMPACT_INTERVAL) -> list[str]:
    """Name the files CompactibleFileStreamLog.allFiles reads for the latest batch of a log.

    The latest compaction (``N.compact``, by the interval Spark derives) and every batch after
    it; [] for a log without batch files.
    """
    if not batches:
        return []
    interval = log_compact_interval(batches, default_interval)
    return [batch_file_name(batch_id, interval) for batch_id in all_valid_batches(max(batches), interval)]


def _compact_batches(batches: dict[int, FileInfo]) -> tuple[int, ...]:
    return tuple(sorted(b for b, info in batches.items() if info.name.endswith(COMPACT_FILE_SUFFIX)))


def batch_file_name(batch_id: int, interval: int) -> str:
    """batchIdToPath: ``N.compact`` for a compaction batch, else ``N``."""
    return f"{batch_id}{COMPACT_FILE_SUFFIX}" if is_compaction_batch(batch_id, interval) else str(batch_id)


def log_batch_files(listing: Iterable[FileInfo]) -> dict[int, FileInfo]:
    """Map batch id -> file of the listing, ignoring checksums, temporaries and directories."""
    files = {}
    for info in listing:
        batch_id = None if info.is_dir else parse_batch_id(info.name, compactible=True)
        if batch_id is not None:
            files[batch_id] = info
    return files


def count_live_entries(storage: CheckpointStorage, dirname: str, kind: LogKind, latest: int, interval: int) -> int:
    """Read the files getAllValidBatches names and count what allFiles would return."""
    entries = [
        entry
        for batch_id in all_valid_batches(latest, interval)
        for entry in _read_entries(storage, dirname, kind, batch_id, interval)
    ]
    # A source compaction repeats every earlier batch's FileEntry, so plain counting is right.
    return len(_apply_deletes(entries)) if kind == "sink" else len(entries)  # type: ignore[arg-type]


def _read_entries(
    storage: CheckpointStorage, dirname: str, kind: LogKind, batch_id: int, interval: int
) -> tuple[SinkFileStatus | FileEntry, ...]:
    """Read batch ``batch_id`` under the name batchIdToPath gives it: ``N.compact`` or ``N``."""
    name = batch_file_name(batch_id, interval)
    relpath = f"{dirname}/{name}" if dirname else name
    parse = parse_sink_log_file if kind == "sink" else parse_source_log_file
    return parse(storage.read_bytes(relpath), source=relpath)


def _apply_deletes(statuses: list[SinkFileStatus]) -> list[SinkFileStatus]:
    """Spark 2.x FileStreamSinkLog.compactLogs: drop every entry whose path a "delete" entry names."""
    deleted = {s.path for s in statuses if s.action == DELETE_ACTION}
    return [s for s in statuses if s.path not in deleted]
