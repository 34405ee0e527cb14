"""The one exception hierarchy of the checkpoint library.

Every error names the file (normally its path relative to the checkpoint root) first, so that
``str(error)`` alone tells an on-call engineer which file is wrong and why:
``"commits/41: line 2 (commit metadata): invalid JSON: Expecting value (at byte 3)"``.
Nothing from ``json``, ``struct``, ``UnicodeDecodeError`` or ``IndexError`` leaks out of the
library; parsers translate such failures into these classes.
"""

from __future__ import annotations


class CheckpointError(Exception):
    """Base class for every problem this library reports about a checkpoint."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self):
        # Pickle rebuilds an exception by calling its class with ``args`` (the message here),
        # which the subclasses' signatures refuse; rebuild without __init__ instead, so that an
        # error crosses a process boundary (Celery's prefork pipe, a process pool) whole: same
        # class, message and fields.
        return _restore_error, (type(self), self.args, dict(self.__dict__))


def _restore_error(cls: type[CheckpointError], args: tuple, fields: dict) -> CheckpointError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(fields)
    return error


class CorruptFileError(CheckpointError):
    """A file exists but its content is not what Spark writes."""

    def __init__(self, path: str, reason: str, *, offset: int | None = None) -> None:
        where = "" if offset is None else f" (at byte {offset})"
        super().__init__(path, f"{reason}{where}")
        # Keep the bare reason: the message already carries the byte position.
        self.reason = reason
        self.offset = offset


class TruncatedFileError(CorruptFileError):
    """The file ends before something it announced (a line, a record, a length)."""


class IncompleteLogFileError(CorruptFileError):
    """An empty metadata-log file; Spark fails on it with "Incomplete log file"."""

    def __init__(self, path: str, *, offset: int | None = None) -> None:
        super().__init__(path, "Incomplete log file: the file is empty", offset=offset)


class UnsupportedVersionError(CheckpointError):
    """A ``vN`` header newer than this reader supports (Spark's UnsupportedLogVersion)."""

    def __init__(self, path: str, *, found: int, supported: int) -> None:
        super().__init__(path, f"log version v{found} is newer than the supported v{supported}")
        self.found = found
        self.supported = supported


class StorageError(CheckpointError):
    """Listing or reading failed (permission, network, not a file); wraps the filesystem or OS error."""


class MissingFileError(StorageError):
    """The file does not exist."""


class PathNotAllowedError(CheckpointError):
    """A URL outside the configured checkpoint roots, or with a scheme that is not allowed."""


class NotACheckpointError(CheckpointError):
    """A path given as a checkpoint root or a file sink's output holds nothing Spark wrote there
    (it is missing, a file, or a folder without a checkpoint's or a sink log's entries)."""


class UnsupportedCodecError(CheckpointError):
    """A file compressed with a codec ckptweb cannot read (snappy, lzf, a custom class).

    ``setting`` names the Spark setting that chose the codec, so the message says what to change.
    """

    def __init__(
        self, path: str, *, codec: str, setting: str = "spark.sql.streaming.stateStore.compression.codec"
    ) -> None:
        super().__init__(
            path, f"compression codec {codec!r} ({setting}) is not supported by ckptweb; supported: lz4, zstd"
        )
        self.codec = codec
