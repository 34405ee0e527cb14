"""The store: what the workers have read from checkpoints, and what users registered."""

from dashboards.models.batches import Batch
from dashboards.models.core import Checkpoint, default_sync_interval_seconds, ms_to_datetime
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
    ACTION_PERMISSIONS,
    AuditEntry,
    MaintenanceAction,
    MaintenancePolicy,
    MaintenanceRefused,
    MaintenanceRun,
    backup_dir_of_run,
    may_run_action,
)
from dashboards.models.progress import (
    CACHE_HITS,
    CACHE_MISSES,
    BatchProgress,
    ChartRollup,
    EventLogDirectory,
    SourceLagMetrics,
    StateOperatorMetrics,
    TimelineRollup,
    cache_hit_ratio,
)
from dashboards.models.queries import QueryRun, StreamingQuery
from dashboards.models.syncs import SyncIssue, SyncRun, SyncTotal

__all__ = [
    "ACTION_PERMISSIONS",
    "backup_dir_of_run",
    "may_run_action",
    "AuditEntry",
    "MaintenanceAction",
    "MaintenancePolicy",
    "MaintenanceRefused",
    "MaintenanceRun",
    "Batch",
    "BatchProgress",
    "ChartRollup",
    "TimelineRollup",
    "SourceLagMetrics",
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
