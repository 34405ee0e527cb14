"""ckptweb's Django-free reader of Spark Structured Streaming checkpoints.

Storage is reached only through ``CheckpointStorage`` (the storage package, the filesystem edge);
parsers take bytes and a ``source`` name and return frozen dataclasses named after Spark's
classes; every problem is a ``CheckpointError`` whose message starts with the file's path.
"""

from .client import BatchView, CheckpointView, CheckpointViewClient, ServerRefusedError, ServerUnavailableError
from .commits import COMMIT_LOG_MAX_VERSION, CommitMetadata, parse_commit
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
from .errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    MissingFileError,
    NotACheckpointError,
    PathNotAllowedError,
    StorageError,
    TruncatedFileError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from .eventlog import EventLog, EventLogFile, EventLogPosition, EventLogTail, codec_of, find_event_logs, tail_event_log
from .fileinfo import FileInfo
from .integrity.checks import run_checks
from .integrity.facts import CheckpointFacts
from .integrity.findings import Finding
from .integrity.gather import check_checkpoint, gather_facts

# Inventory and integrity
from .inventory import (
    LIST_PAGE_KEYS,
    SMALL_FILE_BYTES,
    DirectoryInventory,
    TreeListing,
    build_inventory,
    list_tree,
    take_inventory,
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

# State stores (HDFSBackedStateStoreProvider files, schemas, UnsafeRow)
from .lz4block import DEFAULT_BLOCK_SIZE, compress_lz4_block_stream, decompress_lz4_block_stream, iter_lz4_blocks
from .metadata import StreamMetadata, parse_stream_metadata
from .metadatalog import (
    DEFAULT_COMPACT_INTERVAL,
    SINK_LOG_DIR,
    MetadataLogSummary,
    file_source_log_dirs,
    read_metadata_log,
    sink_log_location,
)
from .offsets import (
    OFFSET_LOG_MAX_VERSION,
    SERIALIZED_VOID_OFFSET,
    OffsetSeq,
    OffsetSeqMetadata,
    parse_offset_seq,
)
from .probe import MAX_PROBES_PER_SYNC, iter_next_entries

# Runtime metrics: progress events, event logs
from .progress import (
    ListenerEvent,
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    SinkProgress,
    SourceProgress,
    StateOperatorProgress,
    StreamingQueryProgress,
    idle_event_from_dict,
    listener_event_from_dict,
    parse_streaming_query_progress,
    progress_from_dict,
)
from .rootkinds import (
    CheckpointRoot,
    RootKind,
    SinkOutput,
    SinkOutputKind,
    classify_checkpoint_root,
    classify_sink_output,
)
from .sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    UserDefinedType,
    parse_struct_type,
    simple_string,
)
from .statecodec import DEFAULT_CODEC, MAX_STATE_FILE_BYTES, decompress_state_file, normalize_codec_name
from .statefiles import StateRecord, iter_state_records, parse_state_file
from .stateinventory import (
    DEFAULT_STORE_NAME,
    HdfsStateFile,
    HdfsStoreSummary,
    StateFileInfo,
    StateStoreDir,
    detect_provider,
    files_for_version,
    list_partition_stores,
    list_state_store_dirs,
    parse_hdfs_state_files,
    summarize_hdfs_store,
)
from .staterows import StateSize, measure_state, read_state_size
from .statesample import DecodedStateRow, load_state_rows, sample_state_rows, versions_on_storage
from .stateschema import (
    OPERATOR_METADATA_MAX_VERSION,
    STATE_SCHEMA_MAX_VERSION,
    OperatorInfo,
    OperatorStateMetadata,
    StateSchemaFile,
    StateStoreColFamilySchema,
    StateStoreMetadata,
    StoreSchema,
    find_operator_state_metadata,
    find_store_schema,
    parse_operator_state_metadata,
    parse_state_schema_file,
)
from .storage import MAX_LOG_FILE_BYTES, CheckpointStorage, StorageCalls, check_allowed
from .summary import BatchSummary, CheckpointSummary, FileIssue, summarize_checkpoint
from .unsaferow import decode_unsafe_row

__all__ = [
    # errors
    "CheckpointError",
    "CorruptFileError",
    "IncompleteLogFileError",
    "MissingFileError",
    "NotACheckpointError",
    "PathNotAllowedError",
    "StorageError",
    "TruncatedFileError",
    "UnsupportedVersionError",
    "UnsupportedCodecError",
    # storage
    "MAX_LOG_FILE_BYTES",
    "CheckpointStorage",
    "FileInfo",
    "StorageCalls",
    "check_allowed",
    # what a path holds, before it is read
    "CheckpointRoot",
    "RootKind",
    "SinkOutput",
    "SinkOutputKind",
    "classify_checkpoint_root",
    "classify_sink_output",
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
    # state stores
    "DEFAULT_BLOCK_SIZE",
    "compress_lz4_block_stream",
    "decompress_lz4_block_stream",
    "iter_lz4_blocks",
    "DEFAULT_CODEC",
    "MAX_STATE_FILE_BYTES",
    "decompress_state_file",
    "normalize_codec_name",
    "StateRecord",
    "iter_state_records",
    "parse_state_file",
    "DEFAULT_STORE_NAME",
    "HdfsStateFile",
    "HdfsStoreSummary",
    "StateFileInfo",
    "StateStoreDir",
    "detect_provider",
    "files_for_version",
    "list_partition_stores",
    "list_state_store_dirs",
    "parse_hdfs_state_files",
    "summarize_hdfs_store",
    "StateSize",
    "measure_state",
    "read_state_size",
    "ArrayType",
    "AtomicType",
    "DataType",
    "DecimalType",
    "MapType",
    "StructField",
    "StructType",
    "UserDefinedType",
    "parse_struct_type",
    "simple_string",
    "OPERATOR_METADATA_MAX_VERSION",
    "STATE_SCHEMA_MAX_VERSION",
    "OperatorInfo",
    "OperatorStateMetadata",
    "StateSchemaFile",
    "StateStoreColFamilySchema",
    "StateStoreMetadata",
    "StoreSchema",
    "find_operator_state_metadata",
    "find_store_schema",
    "parse_operator_state_metadata",
    "parse_state_schema_file",
    "decode_unsafe_row",
    "DecodedStateRow",
    "load_state_rows",
    "sample_state_rows",
    "versions_on_storage",
    # runtime metrics
    "ListenerEvent",
    "QueryIdleEvent",
    "QueryProgressEvent",
    "QueryStartedEvent",
    "QueryTerminatedEvent",
    "SinkProgress",
    "SourceProgress",
    "StateOperatorProgress",
    "StreamingQueryProgress",
    "idle_event_from_dict",
    "listener_event_from_dict",
    "parse_streaming_query_progress",
    "progress_from_dict",
    "EventLog",
    "EventLogFile",
    "EventLogPosition",
    "EventLogTail",
    "codec_of",
    "find_event_logs",
    "tail_event_log",
    # inventory and integrity
    "LIST_PAGE_KEYS",
    "SMALL_FILE_BYTES",
    "DirectoryInventory",
    "TreeListing",
    "build_inventory",
    "list_tree",
    "take_inventory",
    # probing the next expected names instead of listing
    "MAX_PROBES_PER_SYNC",
    "iter_next_entries",
    "CheckpointFacts",
    "Finding",
    "check_checkpoint",
    "gather_facts",
    "run_checks",
    "BatchView",
    "CheckpointView",
    "CheckpointViewClient",
    "ServerRefusedError",
    "ServerUnavailableError",
]
