"""Checks of the checkpoint's files themselves: directories that cannot be listed, a missing
``metadata``, and files that cannot be read or parsed or are empty.

Codes: directory-unreadable, metadata-missing, log-file-empty, log-file-incomplete,
log-version-unsupported, file-corrupt, file-unreadable. A failed read of a file Spark reads at
restart is an error; the same damage elsewhere only breaks later readers.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..fileinfo import FileInfo
from ..inventory import is_side_file, join_path
from ..layout import COMMITS_DIR, METADATA_FILE, OFFSETS_DIR
from .compactiblelogs import needed_log_files
from .facts import CheckpointFacts
from .findings import Finding, _reason, _unreadable_file_finding


def check_listing_failures(facts: CheckpointFacts) -> Iterator[Finding]:
    for exc in (*facts.listing.failures, *facts.sink_log_failures):
        yield Finding(
            "error",
            "directory-unreadable",
            exc.path,
            _reason(exc),
            "Spark cannot list it either; nothing below it was checked.",
        )


def check_metadata(facts: CheckpointFacts) -> Iterator[Finding]:
    if any(info.name == METADATA_FILE for info in facts.listing.list_dir()):
        return
    if facts.offset_ids or facts.commit_ids:
        yield Finding(
            "error",
            "metadata-missing",
            METADATA_FILE,
            "the checkpoint has batches but no metadata file",
            "Spark 4.2+ refuses to start (STREAMING_CHECKPOINT_MISSING_METADATA_FILE, unless "
            "spark.sql.streaming.checkpoint.verifyMetadataExists.enabled=false); older versions "
            "start under a new query id, which can duplicate writes.",
        )
    else:
        yield Finding("info", "metadata-missing", METADATA_FILE, "the query has not started yet", "none")


def check_read_files(facts: CheckpointFacts) -> Iterator[Finding]:
    """Every file read at restart that failed; these are errors because Spark reads them too."""
    for read in facts.reads:
        if read.error is not None:
            yield _unreadable_file_finding(read.error, read.error.path, "error", _restart_read_impact(read.path))


def _restart_read_impact(path: str) -> str:
    if path == METADATA_FILE:
        return "Spark fails at start: StreamExecution reads the query id from it."
    return "Spark fails at restart: it reads this file to find where to resume."


def check_empty_files(facts: CheckpointFacts) -> Iterator[Finding]:
    """Empty metadata-log files found by their listed size, except those already reported."""
    reported = {read.error.path for read in (*facts.reads, *(log.outcome for log in facts.logs)) if read.error}
    restart_paths = _restart_paths(facts)
    for path, info in _log_files(facts):
        if info.size == 0 and path not in reported and not is_side_file(info.name):
            on_restart_path = path in restart_paths
            yield Finding(
                "error" if on_restart_path else "warning",
                "log-file-empty",
                path,
                "Incomplete log file: the file is empty",
                _restart_read_impact(path)
                if on_restart_path
                else "Spark's restart does not read it, but reading this batch (rollback, state reader) fails.",
            )


def _log_files(facts: CheckpointFacts) -> Iterator[tuple[str, FileInfo]]:
    """Every file of the offsets, commits and compactible logs, by its finding path."""
    for dirname in (OFFSETS_DIR, COMMITS_DIR):
        for info in facts.listing.list_dir(dirname):
            yield join_path(dirname, info.name), info
    for log in facts.logs:
        for info in log.files:
            yield join_path(log.path, info.name), info


def _restart_paths(facts: CheckpointFacts) -> set[str]:
    paths = {read.path for read in facts.reads}
    for log in facts.logs:
        paths.update(join_path(log.path, name) for name in needed_log_files(log.files, log.default_interval))
    return paths
