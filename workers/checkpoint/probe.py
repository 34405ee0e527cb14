"""Find new metadata-log entries by asking for the next expected names, without listing.

Spark's HDFSMetadataLog names entries by consecutive batch ids (``offsets/N`` is written only
after ``offsets/N-1``), so after batch N the next entry can only be N+1. Reading the names in
turn until one is missing costs one call per new entry plus one, whatever the history length;
a directory LIST on an object store costs one call per 1,000 names of the whole history.
What probing cannot see (entries Spark purged, a file that appeared out of order behind a gap)
is left to a periodic full listing (the reconcile pass of workers.sync).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from .errors import CheckpointError, MissingFileError, StorageError
from .storage.checkpointstorage import CheckpointStorage

T = TypeVar("T")

# One sync never probes further than this many entries: a query that ran far ahead while the
# worker was down is caught up over several syncs, with memory bounded by this window.
MAX_PROBES_PER_SYNC = 10_000


def iter_next_entries(
    storage: CheckpointStorage,
    reader: Callable[[CheckpointStorage, int], T],
    first_batch_id: int,
    *,
    limit: int = MAX_PROBES_PER_SYNC,
) -> Iterator[tuple[int, T | CheckpointError]]:
    """Yield (batch_id, entry or the error reading it) from ``first_batch_id`` on, until one is missing.

    A corrupt entry is yielded as its CheckpointError and probing goes on: the file exists, so
    the log continues past it. A storage failure (unreachable, timed out, denied) is yielded and
    ends the probe: whether the entry exists is unknown, and an unreachable store would fail
    every further name the same way. Stops after ``limit`` entries.
    """
    for batch_id in range(first_batch_id, first_batch_id + limit):
        try:
            yield batch_id, reader(storage, batch_id)
        except MissingFileError:
            return
        except StorageError as exc:
            yield batch_id, exc
            return
        except CheckpointError as exc:
            yield batch_id, exc
