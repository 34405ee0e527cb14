"""The store: what the workers have read from checkpoints, and what users registered."""

from dashboards.models.core import (
    Batch,
    Checkpoint,
    QueryRun,
    StreamingQuery,
    SyncIssue,
    SyncRun,
    SyncTotal,
    default_sync_interval_seconds,
    ms_to_datetime,
)
from dashboards.models.inspection import (
    CompactFile,
    DirectoryInventory,
    Finding,
    MetadataLog,
    StatePartition,
    StateSample,
    StateScan,
    StateScanChunk,
)
from dashboards.models.maintenance import (
    AuditEntry,
    MaintenanceAction,
    MaintenancePolicy,
    MaintenanceRefused,
    MaintenanceRun,
)
from dashboards.models.progress import (
    CACHE_HITS,
    CACHE_MISSES,
    BatchProgress,
    EventLogDirectory,
    StateOperatorMetrics,
    cache_hit_ratio,
)

__all__ = [
    "AuditEntry",
    "MaintenanceAction",
    "MaintenancePolicy",
    "MaintenanceRefused",
    "MaintenanceRun",
    "Batch",
    "BatchProgress",
    "Checkpoint",
    "CompactFile",
    "DirectoryInventory",
    "EventLogDirectory",
    "Finding",
    "MetadataLog",
    "QueryRun",
    "StateOperatorMetrics",
    "StatePartition",
    "StateScan",
    "StateScanChunk",
    "StateSample",
    "StreamingQuery",
    "SyncIssue",
    "SyncRun",
    "SyncTotal",
    "CACHE_HITS",
    "CACHE_MISSES",
    "cache_hit_ratio",
    "default_sync_interval_seconds",
    "ms_to_datetime",
]
