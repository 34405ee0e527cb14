"""ckptweb's Django-free reader of Spark Structured Streaming checkpoints.

Storage is reached only through ``CheckpointStorage`` (storage.py, the filesystem edge);
parsers take bytes and a ``source`` name and return frozen dataclasses named after Spark's
classes; every problem is a ``CheckpointError`` whose message starts with the file's path.
"""

from .commits import COMMIT_LOG_MAX_VERSION, CommitMetadata, parse_commit
from .errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    MissingFileError,
    PathNotAllowedError,
    StorageError,
    TruncatedFileError,
    UnsupportedVersionError,
)
from .layout import (
    COMMITS_DIR,
    METADATA_FILE,
    OFFSETS_DIR,
    is_temporary_file,
    parse_batch_id,
)
from .logdir import find_stream_metadata, list_batch_ids, read_commit, read_offset_seq
from .logfile import LogFile, parse_log_file
from .metadata import StreamMetadata, parse_stream_metadata
from .offsets import (
    OFFSET_LOG_MAX_VERSION,
    SERIALIZED_VOID_OFFSET,
    OffsetSeq,
    OffsetSeqMetadata,
    parse_offset_seq,
)
from .storage import (
    MAX_LOG_FILE_BYTES,
    CheckpointStorage,
    FileInfo,
    StorageCalls,
    check_allowed,
)
from .summary import BatchSummary, CheckpointSummary, FileIssue, summarize_checkpoint

__all__ = [
    # errors
    "CheckpointError",
    "CorruptFileError",
    "IncompleteLogFileError",
    "MissingFileError",
    "PathNotAllowedError",
    "StorageError",
    "TruncatedFileError",
    "UnsupportedVersionError",
    # storage
    "MAX_LOG_FILE_BYTES",
    "CheckpointStorage",
    "FileInfo",
    "StorageCalls",
    "check_allowed",
    # layout
    "COMMITS_DIR",
    "METADATA_FILE",
    "OFFSETS_DIR",
    "is_temporary_file",
    "parse_batch_id",
    # parsers
    "LogFile",
    "parse_log_file",
    "StreamMetadata",
    "parse_stream_metadata",
    "OFFSET_LOG_MAX_VERSION",
    "SERIALIZED_VOID_OFFSET",
    "OffsetSeq",
    "OffsetSeqMetadata",
    "parse_offset_seq",
    "COMMIT_LOG_MAX_VERSION",
    "CommitMetadata",
    "parse_commit",
    # readers
    "find_stream_metadata",
    "list_batch_ids",
    "read_commit",
    "read_offset_seq",
    "summarize_checkpoint",
    "BatchSummary",
    "CheckpointSummary",
    "FileIssue",
]
