"""What a backend answers, in the library's terms: a listing entry as a FileInfo (whatever the backend
calls its modification time), and a failed backend call as a StorageError naming the file.
"""

from __future__ import annotations

import datetime
import posixpath
from typing import Any

from ..errors import StorageError
from ..fileinfo import FileInfo

# What a backend call may raise besides FileNotFoundError: anything. Backends have their own
# exception types (botocore's EndpointConnectionError while S3 is unreachable is no OSError;
# s3fs, gcsfs and adlfs translate their client errors into OSError subclasses; FSTimeoutError is
# fsspec's own for async backends), and a storage failure of one file must become a StorageError
# naming it, not a crash of the sync.
BACKEND_ERRORS = (Exception,)
# fsspec listing keys that carry a modification time, most specific first. The memory
# filesystem only records "created", which is the mtime of Spark's write-once files.
MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")


def file_info(entry: dict[str, Any]) -> FileInfo:
    """Turn one fsspec ``ls(detail=True)`` entry into a FileInfo."""
    name = posixpath.basename(entry["name"].rstrip("/"))
    is_dir = entry.get("type") == "directory"
    return FileInfo(name=name, size=int(entry.get("size") or 0), mtime=mtime_seconds(entry), is_dir=is_dir)


def mtime_seconds(entry: dict[str, Any]) -> float | None:
    """Find the modification time in a listing entry, whatever the backend calls it."""
    for key in MTIME_KEYS:
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


def storage_error(relpath: str, action: str, exc: BaseException) -> StorageError:
    """Build the StorageError for a failed backend call, keeping the backend's explanation."""
    if isinstance(exc, PermissionError):
        return StorageError(relpath, f"{action}: permission denied")
    return StorageError(relpath, f"{action}: {type(exc).__name__}: {exc}")
