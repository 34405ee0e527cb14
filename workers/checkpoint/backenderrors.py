"""What a storage backend call may raise, and the StorageError naming the file it becomes.

Shared by the storage edge and the local listing, so that a failure reads the same whichever
path the call took.
"""

from __future__ import annotations

from .errors import StorageError

# s3fs, gcsfs and adlfs translate their client errors into OSError subclasses; FSTimeoutError
# is fsspec's own for async backends.
# What a backend call may raise besides FileNotFoundError: anything. Backends have their own
# exception types (botocore's EndpointConnectionError while S3 is unreachable is no OSError), and
# a storage failure of one file must become a StorageError naming it, not a crash of the sync.
_BACKEND_ERRORS = (Exception,)


def _storage_error(relpath: str, action: str, exc: BaseException) -> StorageError:
    """Build the StorageError for a failed backend call, keeping the backend's explanation."""
    if isinstance(exc, PermissionError):
        return StorageError(relpath, f"{action}: permission denied")
    return StorageError(relpath, f"{action}: {type(exc).__name__}: {exc}")
