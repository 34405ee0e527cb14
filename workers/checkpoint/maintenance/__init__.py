"""Checkpoint maintenance: pure ``plan_*`` functions and ``apply_plan`` through the storage edge.

Each action lives in its own module and returns a ``MaintenancePlan`` (``plan.py``) naming every
file it writes and deletes and the preconditions; ``execute.apply_plan`` carries a confirmed
plan out crash-safely.
"""

from .cleanup import (
    DEFAULT_MIN_VERSIONS_TO_RETAIN,
    apply_cleanup,
    cleanup_plan_from_listings,
    plan_cleanup,
    read_zip_metadata,
)
from .compaction import (
    DEFAULT_CLEANUP_DELAY_SECONDS,
    DEFAULT_MIN_BATCHES_TO_RETAIN,
    apply_compaction,
    build_compaction_content,
    compaction_plan_from_listings,
    expiry_plan_from_listings,
    plan_compaction,
)
from .execute import AppliedPlan, ContentBuilder, PlanOutdatedError, StepHook, apply_plan
from .plan import (
    OVERRIDABLE_PRECONDITIONS,
    FileState,
    MaintenancePlan,
    PlannedDelete,
    PlannedWrite,
    Precondition,
    plan_from_json,
    precondition,
    restrict_to_confirmed,
)
from .preconditions import DEFAULT_QUIET_SECONDS, query_stopped
from .purge import DEFAULT_KEEP_BATCHES, apply_purge, oldest_state_version, plan_purge, purge_plan_from_listings
from .sidecars import directory_uses_hadoop_crc, hadoop_crc_bytes, hadoop_crc_name, sidecars_of
from .snapshot import (
    DEFAULT_MIN_CHAIN,
    apply_snapshot,
    build_snapshot_content,
    plan_snapshot,
    snapshot_plan_from_listings,
)
from .statestores import StateListings, list_state_listings

__all__ = [
    "DEFAULT_MIN_CHAIN",
    "DEFAULT_MIN_VERSIONS_TO_RETAIN",
    "StateListings",
    "apply_cleanup",
    "apply_snapshot",
    "build_snapshot_content",
    "cleanup_plan_from_listings",
    "list_state_listings",
    "plan_cleanup",
    "plan_snapshot",
    "read_zip_metadata",
    "snapshot_plan_from_listings",
    "DEFAULT_CLEANUP_DELAY_SECONDS",
    "DEFAULT_KEEP_BATCHES",
    "DEFAULT_MIN_BATCHES_TO_RETAIN",
    "apply_compaction",
    "apply_purge",
    "build_compaction_content",
    "compaction_plan_from_listings",
    "expiry_plan_from_listings",
    "oldest_state_version",
    "plan_compaction",
    "plan_purge",
    "purge_plan_from_listings",
    "DEFAULT_QUIET_SECONDS",
    "OVERRIDABLE_PRECONDITIONS",
    "AppliedPlan",
    "ContentBuilder",
    "FileState",
    "MaintenancePlan",
    "PlanOutdatedError",
    "PlannedDelete",
    "PlannedWrite",
    "Precondition",
    "StepHook",
    "apply_plan",
    "directory_uses_hadoop_crc",
    "hadoop_crc_bytes",
    "hadoop_crc_name",
    "plan_from_json",
    "precondition",
    "query_stopped",
    "restrict_to_confirmed",
    "sidecars_of",
]
