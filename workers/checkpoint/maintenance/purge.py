"""Purge old offset and commit log files, as HDFSMetadataLog.purge does (§2.6).

Spark's driver calls ``offsetLog.purge(b - minBatchesToRetain)`` and ``commitLog.purge(...)`` at
the start of batch b: every ``offsets/N`` and ``commits/N`` with N below the threshold goes. This
action does the same for a stopped query (e.g. after ``minBatchesToRetain`` was raised, or when
the files were kept for a while), with a threshold that never reaches what Spark needs:

* the latest committed batch and everything after it (an uncommitted last ``offsets/N`` and the
  commit of the batch before it stay, so the restart re-runs that batch);
* the offsets of the batch before the latest offsets file: MicroBatchExecution.populateStartOffsets
  reads them at restart and fails with "batch N-1 doesn't exist" without them (which is why
  Spark's own purge, at minBatchesToRetain 1, still leaves two offsets files);
* the batches whose state versions are still on disk: version V is written by batch V-1, and the
  state data source reads the offsets and commits of the batch it loads, so offsets and commits
  stay for every batch from (the oldest state version in any store) - 1 on.

Deletes go oldest first, each sidecar right before its file, so a killed run always leaves a
contiguous suffix of both logs. The compactible logs (``sources/<i>``, ``_spark_metadata``) are
never purged (Spark throws on it); ``compactionexpiry.expiry_plan_from_listings`` is their counterpart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..fileinfo import FileInfo
from ..layout import COMMITS_DIR, OFFSETS_DIR, parse_batch_id
from ..rocksdbfiles import parse_rocksdb_store_files
from ..stateinventory import StateStoreDir, detect_provider, list_state_store_dirs, parse_hdfs_state_files
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import format_size, plural
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import MaintenancePlan, PlannedDelete, PlannedWrite, Precondition, batch_ids_text, batch_span, precondition
from .planning import PlanStart, delete_with_sidecars, list_batch_logs, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS

ACTION = "purge"
# spark.sql.streaming.minBatchesToRetain default.
DEFAULT_KEEP_BATCHES = 100


@dataclass(frozen=True, slots=True)
class PurgeLimit:
    """One bound on the purge threshold (batches below it go) and why it is there.

    ``parameter`` names the request parameter that sets it; None for a guard of what Spark reads.
    """

    threshold: int
    reason: str
    parameter: str | None = None


def plan_purge(
    storage: CheckpointStorage,
    *,
    keep_batches: int = DEFAULT_KEEP_BATCHES,
    before_batch: int | None = None,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """Plan the purge of ``storage``'s offsets and commits (one LIST per log, the state tree's LISTs)."""
    offsets, commits = list_batch_logs(storage)
    return purge_plan_from_listings(
        offsets,
        commits,
        oldest_state_version=oldest_state_version(list_state_store_dirs(storage)),
        keep_batches=keep_batches,
        before_batch=before_batch,
        now=now,
        quiet_seconds=quiet_seconds,
    )


def oldest_state_version(stores: Iterable[StateStoreDir]) -> int | None:
    """The lowest version any store still has a file for (delta, snapshot, zip or changelog)."""
    oldest = None
    for store in stores:
        versions = _store_versions(store)
        if versions:
            oldest = min(versions) if oldest is None else min(oldest, min(versions))
    return oldest


def _store_versions(store: StateStoreDir) -> Sequence[int]:
    provider = detect_provider(store.files)
    if provider == "hdfs":
        return [f.version for f in parse_hdfs_state_files(store.files)[0]]
    if provider == "rocksdb":
        return parse_rocksdb_store_files(store.files).versions
    return ()


def purge_plan_from_listings(
    offsets: Sequence[FileInfo],
    commits: Sequence[FileInfo],
    *,
    oldest_state_version: int | None,
    keep_batches: int = DEFAULT_KEEP_BATCHES,
    before_batch: int | None = None,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """The pure core of ``plan_purge``: the listings of ``offsets/`` and ``commits/`` and the state."""
    _check_arguments(keep_batches, before_batch)
    parameters = {"keep_batches": keep_batches, "before_batch": before_batch}
    start = start_plan(ACTION, parameters, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    logs = {OFFSETS_DIR: _batch_files(offsets), COMMITS_DIR: _batch_files(commits)}
    if not logs[COMMITS_DIR]:
        return start.nothing_to_do("nothing to purge: no batch is committed yet")
    return _purge_below_limits(start, logs, {OFFSETS_DIR: offsets, COMMITS_DIR: commits}, oldest_state_version)


def _purge_below_limits(
    start: PlanStart,
    logs: dict[str, dict[int, FileInfo]],
    listings: dict[str, Sequence[FileInfo]],
    oldest_state_version: int | None,
) -> MaintenancePlan:
    """The plan that deletes the batches below every limit, ``logs``' files by batch id and ``listings``' by name."""
    latest_committed = max(logs[COMMITS_DIR])
    latest_offsets = max(logs[OFFSETS_DIR], default=latest_committed)
    limits = purge_limits(
        latest_committed,
        latest_offsets,
        keep_batches=start.parameters["keep_batches"],
        before_batch=start.parameters["before_batch"],
        oldest_state=oldest_state_version,
    )
    required = _required_from(latest_committed, latest_offsets, oldest_state_version)
    return _finish_purge(start, logs, listings, limits, latest_committed, required)


def _finish_purge(
    start: PlanStart,
    logs: dict[str, dict[int, FileInfo]],
    listings: dict[str, Sequence[FileInfo]],
    limits: Sequence[PurgeLimit],
    latest_committed: int,
    required: int,
) -> MaintenancePlan:
    """The plan that deletes the batches below the binding (lowest) one of the ``limits``."""
    keep_batches = start.parameters["keep_batches"]
    binding = min(limits, key=lambda limit: limit.threshold)
    deletes = _deletes(logs, listings, binding.threshold)
    return start.finish(
        deletes=deletes,
        preconditions=(_retention(logs, deletes, latest_committed, required), _contiguity(logs, deletes)),
        summary=_summary(logs, deletes, binding, limits, keep_batches=keep_batches, latest_committed=latest_committed),
        notes=[f"threshold {limit.threshold}: {limit.reason}" for limit in limits],
    )


def _check_arguments(keep_batches: int, before_batch: int | None) -> None:
    if keep_batches < 1:
        raise ValueError(f"keep_batches must be at least 1 (the latest committed batch), got {keep_batches}")
    if before_batch is not None and before_batch < 0:
        raise ValueError(f"before_batch must be a batch id (>= 0), got {before_batch}")


def _batch_files(listing: Iterable[FileInfo]) -> dict[int, FileInfo]:
    files = {}
    for info in listing:
        batch_id = None if info.is_dir else parse_batch_id(info.name)
        if batch_id is not None:
            files[batch_id] = info
    return files


def purge_limits(
    latest_committed: int,
    latest_offsets: int,
    *,
    keep_batches: int,
    before_batch: int | None = None,
    oldest_state: int | None = None,
) -> list[PurgeLimit]:
    """Every bound on the purge threshold; the lowest one binds.

    No threshold is below 0: batch ids start at 0, so 0 already keeps every batch (a plan once
    said "the threshold is -13" when fewer batches existed than were to be kept).
    """
    limits = [
        PurgeLimit(
            max(latest_committed + 1 - keep_batches, 0), _keep_reason(keep_batches, latest_committed), "keep_batches"
        ),
        PurgeLimit(max(latest_offsets - 1, 0), _restart_reason(latest_offsets)),
    ]
    if before_batch is not None:
        limits.append(PurgeLimit(before_batch, "the requested bound (before_batch)", "before_batch"))
    if oldest_state is not None:
        limits.append(_state_limit(oldest_state))
    return limits


def _state_limit(oldest_state: int) -> PurgeLimit:
    """The bound the oldest state version on disk sets: the batch whose offsets and commits it is read with."""
    batch = max(oldest_state - 1, 0)
    return PurgeLimit(
        batch,
        f"state version {oldest_state} is still on disk and is read with batch {batch}'s offsets and commits "
        "(a cleanup of old state files lets older batches go)",
    )


def _keep_reason(keep_batches: int, latest_committed: int) -> str:
    if keep_batches > latest_committed + 1:
        return (
            f"keeping {plural(keep_batches, 'batch', 'batches')} is more than the "
            f"{plural(latest_committed + 1, 'batch', 'batches')} up to {latest_committed}: all stay"
        )
    return f"keep the last {plural(keep_batches, 'committed batch', 'committed batches')}, up to {latest_committed}"


def _restart_reason(latest_offsets: int) -> str:
    if latest_offsets == 0:
        return "batch 0 is the latest: a restart reads its offsets"
    return f"a restart reads the offsets of batch {latest_offsets - 1}, the one before the latest ({latest_offsets})"


def explain_nothing_to_purge(
    oldest: int, newest: int, limits: Sequence[PurgeLimit], *, keep_batches: int, latest_committed: int
) -> str:
    """Say why no batch from ``oldest`` (the oldest stored) to ``newest`` goes, and what request would purge some."""
    blocking = [limit for limit in limits if limit.threshold <= oldest]
    guards = [limit.reason for limit in blocking if limit.parameter is None]
    if guards:
        return f"nothing to purge: batch {oldest}, the oldest stored, is still needed: {'; '.join(guards)}"
    if any(limit.parameter == "before_batch" for limit in blocking):
        return f"nothing to purge: the batch to purge before is not above {oldest}, the oldest stored batch"
    stored = batch_span(oldest, newest)
    # keep_batches k purges batch ``oldest`` once latest_committed + 1 - k > oldest.
    fewer = latest_committed - oldest
    change = f"; keeping {fewer} or fewer would purge from batch {oldest}" if fewer >= 1 else ""
    keeping = plural(keep_batches, "batch", "batches")
    return f"nothing to purge: keeping the last {keeping} keeps {stored}, all that is stored{change}"


def _required_from(latest_committed: int, latest_offsets: int, oldest_state: int | None) -> int:
    """The oldest batch whose offsets and commits Spark may read (restart, state data source)."""
    required = min(latest_committed, latest_offsets - 1)
    required = required if oldest_state is None else min(required, oldest_state - 1)
    return max(required, 0)


def _deletes(
    logs: dict[str, dict[int, FileInfo]], listings: dict[str, Sequence[FileInfo]], threshold: int
) -> tuple[PlannedDelete, ...]:
    """Oldest batch first; per batch its offsets file, then its commit, each after its sidecars."""
    files = {log: {info.name: info for info in listing} for log, listing in listings.items()}
    doomed = sorted({batch_id for batch_ids in logs.values() for batch_id in batch_ids if batch_id < threshold})
    deletes = []
    for batch_id in doomed:
        for log in (OFFSETS_DIR, COMMITS_DIR):
            info = logs[log].get(batch_id)
            if info is not None:
                reason = f"batch {batch_id} is below the purge threshold {threshold}"
                checksum = f"checksum of {log}/{info.name}"
                deletes += delete_with_sidecars(log, info.name, files[log], reason, sidecar_reason=checksum)
    return tuple(deletes)


def _deleted_ids(deletes: Iterable[PlannedDelete], log: str) -> set[int]:
    ids = set()
    for delete in deletes:
        directory, _, name = delete.path.rpartition("/")
        batch_id = parse_batch_id(name)
        if directory == log and batch_id is not None:
            ids.add(batch_id)
    return ids


def _retention(
    logs: dict[str, dict[int, FileInfo]], deletes: Sequence[PlannedDelete], latest_committed: int, required: int
) -> Precondition:
    """Check the planned deletes themselves: nothing at or after ``required`` goes."""
    lost = sorted(
        f"{log}/{batch_id}" for log in logs for batch_id in _deleted_ids(deletes, log) if batch_id >= required
    )
    if lost:
        return precondition("retention", False, f"would delete {', '.join(lost[:5])}, needed from batch {required} on")
    return precondition(
        "retention",
        True,
        f"every offsets and commits file from batch {required} on stays (latest committed batch {latest_committed})",
    )


def _contiguity(logs: dict[str, dict[int, FileInfo]], deletes: Sequence[PlannedDelete]) -> Precondition:
    """What remains of each log must still start where the deletes end: no hole is created."""
    problems, holes = [], []
    for log, files in logs.items():
        deleted = _deleted_ids(deletes, log)
        remaining = sorted(set(files) - deleted)
        if deleted and remaining and max(deleted) > remaining[0]:
            problems.append(f"{log}/{max(deleted)} goes but {log}/{remaining[0]} stays")
        hole = _hole(log, remaining)
        if hole:
            holes.append(hole)
    if problems:
        return precondition("contiguity", False, "; ".join(problems))
    detail = "what remains of offsets/ and commits/ starts right after the purged batches"
    return precondition(
        "contiguity", True, detail + (f" (not caused by this plan: {'; '.join(holes)})" if holes else "")
    )


def _hole(log: str, remaining: Sequence[int]) -> str | None:
    """Which batches the ``remaining`` (sorted) batch ids of ``log`` already lack between their ends, or None."""
    missing = sorted(set(range(remaining[0], remaining[-1] + 1)) - set(remaining)) if remaining else []
    if not missing:
        return None
    lacking = "batch" if len(missing) == 1 else "batches"
    return f"{log} already lacks {lacking} {', '.join(map(str, missing[:5]))}"


def _summary(
    logs: dict[str, dict[int, FileInfo]],
    deletes: Sequence[PlannedDelete],
    binding: PurgeLimit,
    limits: Sequence[PurgeLimit],
    *,
    keep_batches: int,
    latest_committed: int,
) -> str:
    ids = sorted(_deleted_ids(deletes, OFFSETS_DIR) | _deleted_ids(deletes, COMMITS_DIR))
    stored = sorted(set(logs[OFFSETS_DIR]) | set(logs[COMMITS_DIR]))
    if not ids:
        return explain_nothing_to_purge(
            stored[0], stored[-1], limits, keep_batches=keep_batches, latest_committed=latest_committed
        )
    freed = sum(d.size for d in deletes)
    kept = [batch_id for batch_id in stored if batch_id >= binding.threshold]
    return (
        f"purge offsets and commits of {batch_ids_text(ids)}: {plural(len(deletes), 'file')}, {format_size(freed)}; "
        f"keep {batch_ids_text(kept)} ({binding.reason})"
    )


def build_purge_content(storage: CheckpointStorage, write: PlannedWrite) -> bytes:
    """A purge writes nothing; a plan that asks for a write did not come from ``plan_purge``."""
    raise ValueError(f"{write.path}: a purge plan has no writes")


def apply_purge(storage: CheckpointStorage, plan: MaintenancePlan, on_step: StepHook | None = None) -> AppliedPlan:
    """Carry out a confirmed purge plan (deletes only, in the plan's order)."""
    return apply_plan(storage, plan, build_purge_content, on_step=on_step)
