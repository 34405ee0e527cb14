"""One entry of a directory listing (``FileInfo``), and how an fsspec listing entry becomes one.

Its own module because nearly every part of the library handles listings, and most of them need
nothing else of the storage edge.
"""

from __future__ import annotations

import datetime
import posixpath
from dataclasses import dataclass
from typing import Any

# fsspec listing keys that carry a modification time, most specific first. The memory
# filesystem only records "created", which is the mtime of Spark's write-once files.
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a directory listing; ``mtime`` is in seconds since the epoch, if known."""

    name: str
    size: int
    mtime: float | None
    is_dir: bool


def _file_info(entry: dict[str, Any]) -> FileInfo:
    """Turn one fsspec ``ls(detail=True)`` entry into a FileInfo."""
    name = posixpath.basename(entry["name"].rstrip("/"))
    is_dir = entry.get("type") == "directory"
    return FileInfo(name=name, size=int(entry.get("size") or 0), mtime=_mtime_seconds(entry), is_dir=is_dir)


def _mtime_seconds(entry: dict[str, Any]) -> float | None:
    """Find the modification time in a listing entry, whatever the backend calls it."""
    for key in _MTIME_KEYS:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None
