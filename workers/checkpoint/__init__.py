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
from .compactible import (
    COMPACTIBLE_LOG_MAX_VERSION,
    FileEntry,
    SinkFileStatus,
    all_valid_batches,
    derive_compact_interval,
    is_compaction_batch,
    next_compaction_batch_id,
    parse_sink_log_file,
    parse_source_log_file,
    plan_expired_files,
    valid_batches_before_compaction,
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
from .metadatalog import (
    DEFAULT_COMPACT_INTERVAL,
    SINK_LOG_DIR,
    MetadataLogSummary,
    file_source_log_dirs,
    read_metadata_log,
    sink_log_location,
)
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
    "COMPACTIBLE_LOG_MAX_VERSION",
    "FileEntry",
    "SinkFileStatus",
    "parse_sink_log_file",
    "parse_source_log_file",
    # compaction arithmetic and plans (CompactibleFileStreamLog)
    "all_valid_batches",
    "derive_compact_interval",
    "is_compaction_batch",
    "next_compaction_batch_id",
    "plan_expired_files",
    "valid_batches_before_compaction",
    # readers
    "find_stream_metadata",
    "list_batch_ids",
    "read_commit",
    "read_metadata_log",
    "DEFAULT_COMPACT_INTERVAL",
    "MetadataLogSummary",
    "file_source_log_dirs",
    "sink_log_location",
    "SINK_LOG_DIR",
    "read_offset_seq",
    "summarize_checkpoint",
    "BatchSummary",
    "CheckpointSummary",
    "FileIssue",
]
