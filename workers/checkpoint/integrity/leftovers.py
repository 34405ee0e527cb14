"""Checks for leftovers: temporary files of interrupted atomic writes and Hadoop checksums of deleted files.

Codes: temporary-file, orphan-checksum. The grace period lives here because the cleanup, which
deletes what these checks find, must spare the same writes in flight.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..fileinfo import FileInfo
from ..inventory import is_hadoop_checksum, is_temporary_name, join_path
from .facts import CheckpointFacts
from .findings import Finding

# A running query's atomic writes leave a temporary file for moments; younger ones are not findings.
TEMPORARY_FILE_GRACE_SECONDS = 600


def check_leftovers(facts: CheckpointFacts) -> Iterator[Finding]:
    """Temporary files of interrupted writes and Hadoop checksums of deleted files, everywhere."""
    in_progress_after = None if facts.observed_at is None else facts.observed_at - TEMPORARY_FILE_GRACE_SECONDS
    for dirname, entries in facts.listing.directories.items():
        yield from _leftovers_in(dirname, entries, in_progress_after)
    for log in facts.logs:
        if log.kind == "sink":
            yield from _leftovers_in(log.path, log.files, in_progress_after)


def _leftovers_in(dirname: str, entries: Sequence[FileInfo], in_progress_after: float | None) -> Iterator[Finding]:
    """``in_progress_after``: a temporary file modified after this (epoch seconds) is a write in flight."""
    names = {info.name for info in entries if not info.is_dir}
    recent = _modified_after(entries, in_progress_after)
    for name in sorted(names):
        checked = name[1 : -len(".crc")] if is_hadoop_checksum(name) else name
        if is_temporary_name(checked) and name in recent:
            continue
        if is_temporary_name(checked):
            yield _temporary_file(join_path(dirname, name))
        elif checked != name and checked not in names:
            yield Finding(
                "warning",
                "orphan-checksum",
                join_path(dirname, name),
                f"Hadoop checksum of {checked}, which no longer exists",
                "None: Spark ignores it. It was left by a deletion that bypassed Hadoop; it can be deleted.",
            )


def _modified_after(entries: Sequence[FileInfo], after: float | None) -> set[str]:
    """The names of the ``entries`` modified after ``after`` (none when it or their time is unknown)."""
    return {info.name for info in entries if after is not None and info.mtime is not None and info.mtime > after}


def _temporary_file(path: str) -> Finding:
    return Finding(
        "warning",
        "temporary-file",
        path,
        "temporary file of an atomic write that never completed (or is in progress)",
        "None: Spark ignores it. When no query is running it is garbage from a crash and can be deleted.",
    )
