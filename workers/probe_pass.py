"""Between two full walks, a sync follows what Spark writes and deletes beyond offsets/ and commits/
by probing the names that can appear, at most every CKPTWEB_INSPECT_INTERVAL_SECONDS.

The full walk (workers.inspection) lists every directory: its calls grow with the retained
files. This pass costs what is new (workers.checkpoint.maintenanceprobe):

- each compactible log known from the last walk (``sources/<i>``, the sink's ``_spark_metadata``)
  is read from its next batch file on, and its live entries counted again from the files
  Spark's allFiles reads (at most one compact interval of them);
- each HDFS or RocksDB state store is asked for the snapshots its maintenance may have written
  since it was last looked at, and whether its oldest version is still there. Only a store where
  maintenance did either is listed again (one LIST of its own directory), so its file figures
  (snapshot, load chain, bytes on disk, oldest version) are exact again; its rows do not change.

What the probe cannot explain (a read that fails, a store whose files say another latest version
than the one followed, a store gone) makes the sync walk in full instead; so do registration,
a request from the query page and CKPTWEB_FULL_WALK_INTERVAL_SECONDS.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings

from dashboards.models import Checkpoint, MetadataLog, StatePartition
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.maintenanceprobe import (
    SNAPSHOT_LOOK_BACK,
    KnownLog,
    KnownStore,
    follow_metadata_log,
    store_maintenance_seen,
)
from workers.checkpoint.metadatalog import MetadataLogSummary
from workers.checkpoint.stateinventory import DEFAULT_STORE_NAME
from workers.checkpoint.statesummary import StateConf, state_conf, summarize_state_stores
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.inspection import store_metadata_log
from workers.intervals import interval_passed
from workers.state_follow import FOLLOWED_FIELDS, FOLLOWED_PROVIDERS, state_store_dir, state_unique_ids
from workers.state_partitions import FILE_FIGURES, refresh_state_totals, stored_state_commits

PROBED_FIELDS = tuple(dict.fromkeys((*FOLLOWED_FIELDS, *FILE_FIGURES, "maintenance_probed_version")))


@dataclass
class ProbePass:
    """What one probe pass read, before it is stored; ``unexplained`` says why a full walk is needed."""

    logs: list[tuple[MetadataLog, MetadataLogSummary | None]] = field(default_factory=list)
    state: list[StatePartition] = field(default_factory=list)
    unexplained: str = ""


def probe_pass_due(checkpoint: Checkpoint, now: datetime) -> bool:
    return interval_passed(checkpoint.last_probed_at, now, settings.INSPECT_INTERVAL_SECONDS)


def read_probe_pass(
    checkpoint: Checkpoint,
    storage: CheckpointStorage,
    sink: CheckpointStorage | None,
    followed: list[StatePartition],
) -> ProbePass:
    """Probe the logs and state stores; ``followed`` are the rows the sync's state follow moved
    (not saved yet), which the probe starts from. Never raises for what storage holds."""
    probe = ProbePass()
    try:
        probe.logs = [(log, _follow_log(log, storage, sink)) for log in checkpoint.metadata_logs.all()]
        probe.state = _probe_state_stores(checkpoint, storage, followed)
    except CheckpointError as exc:
        probe.unexplained = str(exc)
    return probe


def store_probe_pass(checkpoint: Checkpoint, probe: ProbePass, batch_id: int | None, now: datetime) -> None:
    """Save what the probe read (call in the sync's transaction, after the state follow's rows)."""
    for summary in (summary for _, summary in probe.logs if summary is not None):
        store_metadata_log(checkpoint, summary, now, batch_id)
    unchanged = [log.pk for log, summary in probe.logs if summary is None]
    MetadataLog.objects.filter(pk__in=unchanged).update(updated_at=now, read_at_batch_id=batch_id)
    if probe.state:
        StatePartition.objects.bulk_update(probe.state, PROBED_FIELDS, batch_size=500)
        refresh_state_totals(checkpoint)
    checkpoint.last_probed_at = now
    checkpoint.save(update_fields=["last_probed_at"])


def _follow_log(
    log: MetadataLog, storage: CheckpointStorage, sink: CheckpointStorage | None
) -> MetadataLogSummary | None:
    """The log's new summary (its path as stored), None when it has no new batch."""
    log_storage, dirname = (storage, log.path) if log.kind == MetadataLog.Kind.SOURCE else _sink_dir(log, sink)
    known = KnownLog(dirname, log.kind, log.compact_interval, log.latest_batch_id, log.latest_compact_bytes)
    summary = follow_metadata_log(log_storage, known)
    return None if summary is None else replace(summary, path=log.path)


def _sink_dir(log: MetadataLog, sink: CheckpointStorage | None) -> tuple[CheckpointStorage, str]:
    """The sink log's storage and folder in it: the walk stored the log's URL as its path."""
    root = "" if sink is None else sink.url.rstrip("/")
    if sink is None or not (log.path == root or log.path.startswith(f"{root}/")):
        raise CheckpointError(log.path, "the sink log is no longer under the registered sink URL")
    return sink, log.path.removeprefix(root).lstrip("/")


def _probe_state_stores(
    checkpoint: Checkpoint, storage: CheckpointStorage, followed: list[StatePartition]
) -> list[StatePartition]:
    """Ask every followed store whether maintenance wrote or deleted files; list those where it did."""
    rows = {row.pk: row for row in checkpoint.state_partitions.filter(provider__in=FOLLOWED_PROVIDERS)}
    rows.update({row.pk: row for row in followed})
    commits = _commits_for_unique_ids(checkpoint, rows.values())
    conf = state_conf(checkpoint.batches.latest_conf()) if rows else None
    for row in rows.values():
        if _names_known(row, commits) and store_maintenance_seen(
            storage, _known_store(row), state_unique_ids(row, commits)
        ):
            _list_store_again(storage, row, conf, commits)
        row.maintenance_probed_version = row.latest_version
    return list(rows.values())


def _names_known(row: StatePartition, commits: dict[int, Any]) -> bool:
    """Whether the store's file names can be told: not those of a RocksDB store other than the
    default one in checkpoint format 2, whose unique ids the commit log does not give for certain
    (its snapshots and deletions are the full walk's to see)."""
    return not (row.provider == "rocksdb" and row.store != DEFAULT_STORE_NAME and commits)


def _known_store(row: StatePartition) -> KnownStore:
    return KnownStore(
        row.path,
        row.provider,
        row.earliest_version,
        row.latest_version,
        row.snapshot_version,
        row.maintenance_probed_version,
    )


def _commits_for_unique_ids(checkpoint: Checkpoint, rows) -> dict[int, Any]:
    """The stored commits a RocksDB store's file names may need (checkpoint format 2): of the versions probed."""
    versions = [
        version
        for row in rows
        if row.provider == "rocksdb"
        for version in (row.earliest_version, row.maintenance_probed_version, row.latest_version)
        if version is not None
    ]
    if not versions:
        return {}
    # Batch b commits version b + 1; snapshots are looked for from SNAPSHOT_LOOK_BACK versions back.
    return stored_state_commits(checkpoint, range(min(versions) - 1 - SNAPSHOT_LOOK_BACK, max(versions)))


def _list_store_again(storage: CheckpointStorage, row: StatePartition, conf: StateConf, commits) -> None:
    """Read the store's file figures from one listing of its directory, as the full walk would."""
    (summary,) = summarize_state_stores(
        storage,
        [state_store_dir(storage, row)],
        version=None,
        committed_version=row.latest_version,
        conf=conf,
        commits=commits,
    )
    if summary.latest_version != row.latest_version:
        raise CheckpointError(
            row.path, f"its files end at version {summary.latest_version}, not at {row.latest_version} as followed"
        )
    for name in FILE_FIGURES:
        setattr(row, name, getattr(summary, name))
