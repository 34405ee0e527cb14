"""Preconditions every action shares, judged from listings alone (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from ..storage import FileInfo
from .plan import Precondition, precondition

# Spark writes offsets/N at the start of a batch and commits/N at its end; a query that wrote
# neither for this long is taken as stopped unless the caller knows better (live progress).
DEFAULT_QUIET_SECONDS = 300.0


def query_stopped(
    log_listings: Iterable[Iterable[FileInfo]], *, now: float, quiet_seconds: float = DEFAULT_QUIET_SECONDS
) -> Precondition:
    """"query-stopped": no file in the offset and commit logs changed for ``quiet_seconds``.

    ``log_listings`` are the listings of ``offsets/`` and ``commits/``. A listing without
    modification times cannot prove the query is idle, so the precondition fails then.
    """
    mtimes = [info.mtime for listing in log_listings for info in listing if not info.is_dir]
    if not mtimes:
        return precondition("query-stopped", True, "the offset and commit logs are empty")
    if any(mtime is None for mtime in mtimes):
        return precondition("query-stopped", False, "the storage gives no modification times, so activity cannot be ruled out")
    idle = now - max(mtimes)
    if idle >= quiet_seconds:
        return precondition("query-stopped", True, f"no batch written for {idle:.0f} s (at least {quiet_seconds:.0f} s required)")
    return precondition(
        "query-stopped",
        False,
        f"a batch was written {max(idle, 0):.0f} s ago; wait until the query has been idle for {quiet_seconds:.0f} s or stop it",
    )
