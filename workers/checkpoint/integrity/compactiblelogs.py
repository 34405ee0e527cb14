"""Checks of the compactible logs (a file source's ``sources/<i>``, a file sink's ``_spark_metadata``).

Codes: compact-missing, log-file-missing, sink-log-behind-commits, sink-log-missing (and the
unreadable-file codes for a log that cannot be read). They follow which files
CompactibleFileStreamLog.allFiles reads for the latest batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..compactible import next_compaction_batch_id
from ..errors import MissingFileError
from ..fileinfo import FileInfo
from ..inventory import join_path
from ..layout import COMPACT_FILE_SUFFIX
from ..metadatalog import (
    DEFAULT_COMPACT_INTERVAL,
    LogKind,
    files_read_for_latest,
    log_batch_files,
    log_compact_interval,
)
from .batchlogs import _batch_range
from .facts import CheckpointFacts, CompactibleLog
from .findings import Finding, _unreadable_file_finding


def needed_log_files(files: Iterable[FileInfo], default_interval: int = DEFAULT_COMPACT_INTERVAL) -> list[str]:
    """Name the files CompactibleFileStreamLog.allFiles reads for the latest batch of a listing."""
    return files_read_for_latest(log_batch_files(files), default_interval)


def check_compactible_logs(facts: CheckpointFacts) -> Iterator[Finding]:
    for log in facts.logs:
        yield from _missing_log_files(log)
        error = log.outcome.error
        if error is not None and not isinstance(error, MissingFileError):
            path = join_path(log.path, error.path.rpartition("/")[2])
            yield _unreadable_file_finding(error, path, "error", _compactible_impact(log.kind))


def _missing_log_files(log: CompactibleLog) -> Iterator[Finding]:
    present = {info.name for info in log.files}
    needed = needed_log_files(log.files, log.default_interval)
    for name in needed:
        if name not in present:
            is_compact = name.endswith(COMPACT_FILE_SUFFIX)
            yield Finding(
                "error",
                "compact-missing" if is_compact else "log-file-missing",
                join_path(log.path, name),
                f"the latest batch of the {log.kind} log is read through {needed[0]} and the "
                f"batches after it, but {name} is missing",
                _compactible_impact(log.kind),
            )


def _compactible_impact(kind: LogKind) -> str:
    if kind == "source":
        return "Spark fails at restart: the file source reads its whole log when it starts."
    return "Every reader of the sink's output fails now, and the query fails at the sink's next compaction."


def check_sink_log_behind(facts: CheckpointFacts) -> Iterator[Finding]:
    """The file sink logs every batch before it is committed, so its log never ends earlier."""
    commit_ids = facts.commit_ids
    for log in facts.logs:
        batch_files = log_batch_files(log.files)
        if log.kind != "sink" or not commit_ids or not batch_files:
            continue
        end = max(batch_files)
        if end >= commit_ids[-1]:
            continue
        committed = commit_ids[-1]
        yield Finding(
            "error",
            "sink-log-behind-commits",
            join_path(log.path, str(end + 1)),
            f"the sink log ends at batch {end} but the commit log at batch {committed}: the sink's "
            f"entries of {_batch_range(end + 1, committed)} are lost",
            f"The restart works and Spark does not rewrite committed batches; once batch {committed + 1} "
            "is added every reader of the sink fails, and the query fails at the compaction of batch "
            f"{next_compaction_batch_id(committed, log_compact_interval(batch_files, log.default_interval))}.",
        )


def check_sink_log_present(facts: CheckpointFacts) -> Iterator[Finding]:
    """A sink log given for a checkpoint with commits but holding no batch file at all."""
    for log in facts.logs:
        if log.kind == "sink" and facts.commit_ids and not log_batch_files(log.files):
            yield Finding(
                "warning",
                "sink-log-missing",
                log.path,
                "no batch file in the sink log: this is not a file sink's output, or its log was deleted",
                "If it is a file sink, the restart works but Spark starts a new log at the next batch "
                "and readers of the output fail. If it is not, do not check it as a sink log.",
            )
