"""What a path given as a checkpoint root, or as a file sink's output, holds: told before reading it.

Registering and inspecting start here, so that a typo is refused with the reason instead of
showing an empty query that looks healthy. What counts as a checkpoint follows Spark's order of
writes (StreamExecution, HDFSMetadataLog; seen with PySpark 4.3 in
tests/spark/test_rootkinds_vs_spark.py). When a query starts, before its first batch:

* the checkpoint folder gets ``metadata`` (StreamExecution's query id), and the offset and commit
  logs' constructors create ``offsets/`` and ``commits/`` (HDFSMetadataLog makes its folder);
  a file source creates ``sources/<i>/``;
* a file sink creates ``<output>/_spark_metadata/`` (FileStreamSink's FileStreamSinkLog).

``offsets/<N>`` appears when the first batch is planned, ``state/`` with the first stateful
batch. So a folder holding other things but none of ``metadata``, ``offsets/``, ``commits/`` and
``state/`` is no checkpoint; a checkpoint without ``offsets/<N>`` is a query that has not run a
batch yet, which is allowed with a warning. So is an empty folder: a checkpoint location made
for a query that has not started (Spark starts a query on an empty or missing location alike).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .compactible import parse_sink_log_file
from .errors import CheckpointError, NotACheckpointError
from .layout import COMMITS_DIR, METADATA_FILE, OFFSETS_DIR, parse_batch_id
from .logdir import batch_ids_of
from .metadatalog import SINK_LOG_DIR, sink_log_location
from .stateinventory import STATE_DIR

if TYPE_CHECKING:
    from .fileinfo import FileInfo
    from .storage.checkpointstorage import CheckpointStorage

# What Spark writes at a checkpoint's root: a file, and folders.
CHECKPOINT_FILES = frozenset({METADATA_FILE})
CHECKPOINT_DIRS = frozenset({OFFSETS_DIR, COMMITS_DIR, STATE_DIR})


class RootKind(enum.Enum):
    MISSING = "missing"
    FILE = "file"
    NOT_A_CHECKPOINT = "not a checkpoint"
    NOT_STARTED = "not started"
    CHECKPOINT = "checkpoint"


_SHAPE = "the folder holding metadata, offsets/ and commits/"
_ROOT_REFUSALS = {
    RootKind.MISSING: "no such file or folder",
    RootKind.FILE: f"this is a file, not a checkpoint folder: give {_SHAPE}",
}
_NOT_A_CHECKPOINT = "no metadata file and no offsets/, commits/ or state/ folder: not a Spark checkpoint"
_NOT_A_CHECKPOINT_SINK = f"this is a file sink's output (it holds {SINK_LOG_DIR}), not its checkpoint: give {_SHAPE}"


@dataclass(frozen=True, slots=True)
class CheckpointRoot:
    """What ``url`` holds. ``found`` names the checkpoint entries at its root, sorted.

    ``is_sink_output`` is true for a folder holding ``_spark_metadata``: someone gave a file
    sink's output where the checkpoint was asked for.
    """

    url: str
    kind: RootKind
    found: tuple[str, ...] = ()
    is_empty: bool = False
    is_sink_output: bool = False

    @property
    def refusal(self) -> NotACheckpointError | None:
        """The error to refuse this path with, or None when it is a checkpoint."""
        if self.kind is RootKind.NOT_A_CHECKPOINT:
            reason = _NOT_A_CHECKPOINT_SINK if self.is_sink_output else _NOT_A_CHECKPOINT
        else:
            reason = _ROOT_REFUSALS.get(self.kind)
        return None if reason is None else NotACheckpointError(self.url, reason)

    @property
    def warning(self) -> str | None:
        """What to tell about an accepted checkpoint, or None."""
        if self.kind is RootKind.NOT_STARTED and self.is_empty:
            return (
                f"{self.url}: the folder is empty: a query given this checkpoint location has not started "
                "(Spark writes metadata, offsets/ and commits/ when it starts); its batches appear once it runs"
            )
        if self.kind is RootKind.NOT_STARTED:
            return (
                f"{self.url}: the query has not run a batch yet (no offsets/<N> file); "
                "its batches appear once Spark writes them"
            )
        return None


def classify_checkpoint_root(storage: CheckpointStorage) -> CheckpointRoot:
    """Tell what the root of ``storage`` holds: at most two listings and one lookup.

    Raises StorageError when storage cannot be listed (permission, an unreachable store).
    """
    entries = storage.list_dir("")
    if not entries:
        return _without_entries(storage)
    found = tuple(sorted(_checkpoint_entries(entries)))
    if not found:
        is_sink_output = any(info.name == SINK_LOG_DIR and info.is_dir for info in entries)
        return CheckpointRoot(storage.url, RootKind.NOT_A_CHECKPOINT, is_sink_output=is_sink_output)
    has_batch = OFFSETS_DIR in found and bool(batch_ids_of(storage.list_dir(OFFSETS_DIR)))
    return CheckpointRoot(storage.url, RootKind.CHECKPOINT if has_batch else RootKind.NOT_STARTED, found)


def _without_entries(storage: CheckpointStorage) -> CheckpointRoot:
    """A root that lists nothing is missing, a file, or an empty folder (a query not started yet)."""
    info = storage.find_info("")
    if info is None:
        return CheckpointRoot(storage.url, RootKind.MISSING)
    if not info.is_dir:
        return CheckpointRoot(storage.url, RootKind.FILE)
    return CheckpointRoot(storage.url, RootKind.NOT_STARTED, is_empty=True)


def _checkpoint_entries(entries: list[FileInfo]) -> list[str]:
    return [
        info.name
        for info in entries
        if (info.is_dir and info.name in CHECKPOINT_DIRS) or (not info.is_dir and info.name in CHECKPOINT_FILES)
    ]


class SinkOutputKind(enum.Enum):
    MISSING = "missing"
    FILE = "file"
    NO_SINK_LOG = "no sink log"
    NOT_A_SINK_LOG = "numbered files that are no sink log"
    SINK_LOG = "sink log"


_SINK_REFUSALS = {
    SinkOutputKind.MISSING: f"no such folder (a file sink creates its {SINK_LOG_DIR} when the query starts)",
    SinkOutputKind.FILE: f"this is a file: give the sink's output folder or its {SINK_LOG_DIR} folder",
    SinkOutputKind.NO_SINK_LOG: f"no {SINK_LOG_DIR} folder here: "
    "not a file sink's output (give the folder the query writes to)",
}


@dataclass(frozen=True, slots=True)
class SinkOutput:
    """What a path given as a file sink's output holds. ``log_url`` is its ``_spark_metadata`` folder.

    The path may be the sink's output folder (the one the query writes to) or that
    ``_spark_metadata`` folder itself.
    """

    url: str
    log_url: str
    kind: SinkOutputKind
    detail: str = ""

    @property
    def refusal(self) -> NotACheckpointError | None:
        """The error to refuse this path with, or None when it holds a file sink log."""
        if self.kind is SinkOutputKind.NOT_A_SINK_LOG:
            return NotACheckpointError(self.url, f"its numbered files are not a file sink log: {self.detail}")
        reason = _SINK_REFUSALS.get(self.kind)
        return None if reason is None else NotACheckpointError(self.url, reason)


def classify_sink_output(storage: CheckpointStorage) -> SinkOutput:
    """Tell whether the root of ``storage`` is a file sink's output or its log: a few lookups.

    A folder named otherwise that holds a log's batch files (a copy, a restored backup) is a log
    when its newest batch file reads as one (one read). Raises StorageError when storage cannot
    be asked.
    """
    log_dir, log_url = sink_log_location(storage)
    root = storage.find_info("")
    if root is None:
        return SinkOutput(storage.url, log_url, SinkOutputKind.MISSING)
    if not root.is_dir:
        return SinkOutput(storage.url, log_url, SinkOutputKind.FILE)
    if not log_dir and not storage.url.rstrip("/").endswith(f"/{SINK_LOG_DIR}"):
        return _log_by_its_files(storage, log_url)
    log = root if not log_dir else storage.find_info(log_dir)
    kind = SinkOutputKind.SINK_LOG if log is not None and log.is_dir else SinkOutputKind.NO_SINK_LOG
    return SinkOutput(storage.url, log_url, kind)


def _log_by_its_files(storage: CheckpointStorage, log_url: str) -> SinkOutput:
    """A folder under another name than _spark_metadata whose batch files must read as a sink log."""
    names = {info.name: batch_id for info in storage.list_dir("") if (batch_id := _batch_file_id(info)) is not None}
    newest = max(names, key=names.__getitem__)
    try:
        parse_sink_log_file(storage.read_bytes(newest), source=newest)
    except CheckpointError as error:
        return SinkOutput(storage.url, log_url, SinkOutputKind.NOT_A_SINK_LOG, str(error))
    return SinkOutput(storage.url, log_url, SinkOutputKind.SINK_LOG)


def _batch_file_id(info: FileInfo) -> int | None:
    return None if info.is_dir else parse_batch_id(info.name, compactible=True)
