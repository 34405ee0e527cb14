"""Files read ahead together, then handed to the readers of logdir one by one.

The readers (read_offset_seq, read_commit, ...) ask their storage for one file at a time. On an
object store that is one round trip per file; a first sync of 100k batches would wait for 200k of
them in turn. ``read_ahead`` gets a list of files with several GETs in flight
(CheckpointStorage.read_many) and returns something the readers take for their storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import CheckpointError
from .storage.checkpointstorage import MAX_LOG_FILE_BYTES

if TYPE_CHECKING:
    from .storage.checkpointstorage import CheckpointStorage


class ReadAhead:
    """Contents read ahead, each served once (then dropped); any other file is read as usual."""

    def __init__(
        self, storage: CheckpointStorage, contents: dict[str, bytes | CheckpointError], max_bytes: int | None
    ) -> None:
        self._storage = storage
        self._contents = contents
        self._max_bytes = max_bytes

    def __len__(self) -> int:
        return len(self._contents)

    def read_bytes(self, relpath: str, *, max_bytes: int | None = MAX_LOG_FILE_BYTES) -> bytes:
        """The content read ahead, or the error reading it gave; a file not read ahead is read now."""
        if max_bytes != self._max_bytes or relpath not in self._contents:
            return self._storage.read_bytes(relpath, max_bytes=max_bytes)
        content = self._contents.pop(relpath)
        if isinstance(content, CheckpointError):
            raise content
        return content


def read_ahead(
    storage: CheckpointStorage, relpaths: Sequence[str], *, max_bytes: int | None = MAX_LOG_FILE_BYTES
) -> CheckpointStorage | ReadAhead:
    """Read ``relpaths`` together where that saves round trips; else the storage itself.

    A local file is read when asked for (microseconds each), so nothing is held in memory ahead.
    """
    if not storage.reads_concurrently:
        return storage
    return ReadAhead(storage, storage.read_many(relpaths, max_bytes=max_bytes), max_bytes)
