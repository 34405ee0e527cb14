"""Preconditions every action shares, judged from listings alone (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from ..fileinfo import FileInfo
from ..layout import COMMITS_DIR, OFFSETS_DIR
from .plan import Precondition, precondition

# Spark writes offsets/N at the start of a batch and commits/N at its end; a query that wrote
# neither for this long is taken as stopped unless the caller knows better (live progress).
DEFAULT_QUIET_SECONDS = 300.0
# A file dated this far after the storage's clock was stamped by another clock (a client's over
# NFS, a copy that kept its times); less is the jitter of the storage's own stamps.
FUTURE_TOLERANCE_SECONDS = 5.0


def query_stopped(
    offsets: Iterable[FileInfo],
    commits: Iterable[FileInfo],
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> Precondition:
    """ "query-stopped": no file in the offset and commit logs changed for ``quiet_seconds``.

    ``offsets`` and ``commits`` are the listings of the two logs; ``now`` is on the storage's clock
    (``clock.StorageClock``), the clock that dated the files. A listing without modification times
    cannot prove the query is idle, and neither can a file dated after ``now``: whatever stamped it
    disagrees with the storage's clock, so the time since the last batch is unknown.
    """
    files = _log_files(offsets, commits)
    if not files:
        return precondition("query-stopped", True, "the offset and commit logs are empty")
    if any(info.mtime is None for _, info in files):
        return precondition(
            "query-stopped", False, "the storage gives no modification times, so activity cannot be ruled out"
        )
    directory, newest = max(files, key=lambda item: item[1].mtime)
    return _stopped_after_idle(f"{directory}/{newest.name}", now - newest.mtime, quiet_seconds)


def _log_files(offsets: Iterable[FileInfo], commits: Iterable[FileInfo]) -> list[tuple[str, FileInfo]]:
    """(directory, file) of every file (not directory) in the listings of the offset and commit logs."""
    listings = {OFFSETS_DIR: offsets, COMMITS_DIR: commits}
    return [(directory, info) for directory, listing in listings.items() for info in listing if not info.is_dir]


def _stopped_after_idle(newest: str, idle: float, quiet_seconds: float) -> Precondition:
    """ "query-stopped" judged from the seconds since the ``newest`` file of the two logs was written."""
    if idle < -FUTURE_TOLERANCE_SECONDS:
        return precondition(
            "query-stopped",
            False,
            f"{newest} is dated {-idle:.0f} s after the storage's clock: "
            "the clock that stamped it is off, "
            "so the time since the last batch is unknown; make sure the query is stopped",
        )
    if idle >= quiet_seconds:
        return precondition(
            "query-stopped", True, f"no batch written for {idle:.0f} s (at least {quiet_seconds:.0f} s required)"
        )
    return precondition(
        "query-stopped",
        False,
        f"a batch was written {max(idle, 0):.0f} s ago; "
        f"wait until the query has been idle for {quiet_seconds:.0f} s or stop it",
    )
