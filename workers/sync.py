"""Bring one checkpoint's rows up to date with its storage, reading only files not read before.

A sync is one of two kinds (SyncRun.kind). A probe reads offsets/N+1, N+2, ... after the latest
known batch until one is missing, and commits/N of the new and the still uncommitted batches:
its storage calls grow with what is new, not with the history (workers.checkpoint.probe). A
reconcile, on the first sync and then every RECONCILE_INTERVAL_SECONDS, lists offsets/ and
commits/ (two LIST calls) and reads every listed file that has no row yet, which also catches
files written behind a gap and notes the lowest batch Spark has not purged; a probe that finds
Spark purged past it becomes one at once (workers.purge_catch_up). Each records what it did in a
SyncRun. Files that cannot be read become SyncIssue rows; the sync goes on with the others.
A sync that stores newly committed batches also moves the state figures to the version they
committed, reading only that version's state files (workers.state_follow); between full walks it
probes the compactible logs' next files and the state stores' maintenance (workers.probe_pass),
unless the full walk (workers.inspection) runs with it. What a sync read is stored by workers.sync_store.
Spark writes offsets/N and commits/N once and never rewrites them, so a file read is never read
again. Rows of batches Spark has since purged are kept: they are the query's history.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from dashboards.health.query_status import Thresholds
from dashboards.models import Checkpoint, SyncRun
from workers.checkpoint.errors import CheckpointError, MissingFileError
from workers.checkpoint.integrity.facts import CheckpointFacts
from workers.checkpoint.inventory import TreeListing
from workers.checkpoint.logdir import find_stream_metadata, list_batch_ids, read_commit, read_offset_seq
from workers.checkpoint.probe import MAX_PROBES_PER_SYNC, iter_next_entries
from workers.checkpoint.readahead import ReadAhead, read_ahead
from workers.checkpoint.rootkinds import classify_checkpoint_root
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.inspection import (
    findings_to_check_again,
    full_walk_due,
    listing_of_logs,
    read_inspection,
    sink_log_storage,
    walk_checkpoint,
)
from workers.intervals import interval_passed
from workers.probe_pass import probe_pass_due, read_probe_pass
from workers.purge_catch_up import listing_shows_purge_past, probe_fell_behind_purge
from workers.state_follow import read_state_follow
from workers.storage_options import open_storage
from workers.sync_store import BeyondLogs, SyncFindings, store_batches, store_failure, store_findings

# The most offsets files one probe reads: a query far ahead is caught up over several syncs, and
# what a sync holds in memory stays bounded whatever the history.
PROBE_LIMIT = MAX_PROBES_PER_SYNC
# A reconcile that finds more new batches than this stores them in chunks of this many, each in
# its own transaction, so that a first sync of a long history holds one chunk in memory at a time.
RECONCILE_CHUNK_BATCHES = 5_000
# Batches whose files a reconcile reads ahead together on an object store: 128 files, 8 rounds of
# REMOTE_READS_IN_FLIGHT GETs. A window, not the chunk, so that what is held before parsing stays
# small even for a source whose offsets files are large (a Kafka source's: tens of bytes a partition).
READ_AHEAD_BATCHES = 64


def sync_checkpoint(checkpoint_id: int, *, worker: str = "", now: datetime | None = None) -> SyncRun | None:
    """Sync one checkpoint; return its SyncRun, or None when it is gone or another worker holds it."""
    now = now or timezone.now()
    owner = f"{worker or socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    taken = Checkpoint.objects.take_sync_lease(checkpoint_id, owner=owner, now=now, seconds=settings.SYNC_LEASE_SECONDS)
    if not taken:
        return None
    try:
        checkpoint = Checkpoint.objects.get(pk=checkpoint_id)
        _close_abandoned_runs(checkpoint, now)
        run = SyncRun.objects.create(checkpoint=checkpoint, started_at=now, worker=worker)
        _sync_into(checkpoint, run)
        return run
    finally:
        Checkpoint.objects.release_sync_lease(checkpoint_id, owner=owner)


def _close_abandoned_runs(checkpoint: Checkpoint, now: datetime) -> None:
    """Mark failed the runs a dead worker left "running": this sync holds the lease, so no live
    worker can own them. What they stored (chunks of a reconcile) stays; this sync reads the rest."""
    SyncRun.objects.filter(checkpoint=checkpoint, status=SyncRun.Status.RUNNING).update(
        status=SyncRun.Status.FAILED,
        message=f"the worker stopped before this sync finished; the sync of {now:%Y-%m-%d %H:%M:%S} UTC took over",
    )


def _sync_into(checkpoint: Checkpoint, run: SyncRun) -> None:
    try:
        _read_and_store(checkpoint, run)
    except CheckpointError as exc:
        # The checkpoint as a whole could not be read (its root is outside the allowed ones, say).
        store_failure(checkpoint, run, exc)
    except Exception as exc:
        # A bug or an outage of the database: leave no run marked "running" if the database lets
        # us, then let Celery log the original error.
        with contextlib.suppress(DatabaseError):
            store_failure(checkpoint, run, exc)
        raise


def _read_and_store(checkpoint: Checkpoint, run: SyncRun) -> None:
    """Read what is new in the checkpoint (a probe or a reconcile, and the full walk when due) and store it."""
    storage = open_storage(checkpoint.url)
    sink = sink_log_storage(checkpoint)
    # The full walk walks first, so that a reconcile due with it lists nothing twice.
    facts = walk_checkpoint(storage, sink, checkpoint) if full_walk_due(checkpoint, run.started_at) else None
    is_reconcile = reconcile_due(checkpoint, run.started_at) or listing_shows_purge_past(
        checkpoint, listing_of_logs(facts)
    )
    findings = SyncFindings(is_reconcile=is_reconcile)
    with _collector_skips_what_exists_now(), storage.reusing_directories():
        _read_new_files(checkpoint, storage, findings, listing_of_logs(facts), run.started_at)
        run.kind = SyncRun.Kind.RECONCILE if findings.is_reconcile else SyncRun.Kind.PROBE
        findings.root_problem = _root_problem(checkpoint, storage, findings)
        beyond = _read_beyond_logs(checkpoint, storage, sink, facts, findings, run)
        store_findings(checkpoint, run, [storage, sink], findings, beyond)


def _read_beyond_logs(
    checkpoint: Checkpoint,
    storage: CheckpointStorage,
    sink: CheckpointStorage | None,
    facts: CheckpointFacts | None,
    findings: SyncFindings,
    run: SyncRun,
) -> BeyondLogs:
    """Follow the state and probe what changed beyond the logs, unless a full walk is due, or the
    commits this sync read settle an open finding about the batches that had none (checked again
    now, not at the next walk), or the probe found what it cannot explain."""
    now = run.started_at
    if facts is None and not findings_to_check_again(checkpoint, findings.new_commits):
        followed = read_state_follow(checkpoint, storage, findings.new_commits, now)
        if not probe_pass_due(checkpoint, now):
            return BeyondLogs(followed_state=followed)
        probe = read_probe_pass(checkpoint, storage, sink, followed)
        if not probe.unexplained:
            return BeyondLogs(followed_state=followed, probe=probe)
        run.message = f"full walk: the probe between walks could not explain {probe.unexplained}"
    if facts is None:
        facts = walk_checkpoint(storage, sink, checkpoint)
    return BeyondLogs(inspection=read_inspection(storage, facts, checkpoint, findings.new_commits, now))


@contextlib.contextmanager
def _collector_skips_what_exists_now() -> Iterator[None]:
    """Keep Python's cyclic garbage collector off the objects that exist now, until the block ends.

    Reading a long history allocates millions of objects, and each full collection walked every
    object the process already held (the walk's listing of 200k files, Django itself): 1.0 s of a
    7.8 s first sync of 100k batches (docs/benchmarks.md, P2). Reference counting still frees
    everything as usual; the frozen objects are the collector's again when the block ends.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _root_problem(checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings) -> str:
    """Say what the path holds when it is no checkpoint, "" when it is one.

    Offsets files found tell it is one, with no call more. Otherwise the root is looked at while
    the checkpoint has no batch, and by a reconcile that listed no offsets file (a checkpoint
    deleted or replaced under its registration); a probe of a checkpoint with batches keeps what
    was known.
    """
    if findings.new_offsets or findings.stored_batches or findings.earliest_batch_id is not None:
        return ""
    if checkpoint.latest_batch_id is not None and not findings.is_reconcile:
        return checkpoint.root_problem
    refusal = classify_checkpoint_root(storage).refusal
    return "" if refusal is None else str(refusal)


def reconcile_due(checkpoint: Checkpoint, now: datetime) -> bool:
    """Tell whether this sync lists the log directories instead of probing the next names."""
    return interval_passed(checkpoint.last_reconciled_at, now, settings.RECONCILE_INTERVAL_SECONDS)


def _read_new_files(
    checkpoint: Checkpoint,
    storage: CheckpointStorage,
    findings: SyncFindings,
    listing: TreeListing | None,
    now: datetime,
) -> None:
    """Read the files not read before; a reconcile lists offsets/ and commits/, or takes them from ``listing``.

    A probe that finds Spark purged past it turns into a reconcile at once (workers.purge_catch_up).
    """
    if checkpoint.query_id is None:
        findings.query_id = _find_query_id(storage, findings)
    if findings.is_reconcile:
        _read_listed_files(checkpoint, storage, findings, listing or storage)
        return
    _read_probed_files(checkpoint, storage, findings)
    thresholds = Thresholds.from_settings(settings)
    # A commit read proves Spark has not purged past it (it deletes the oldest first).
    nothing_new = not findings.new_offsets and not findings.new_commits
    if nothing_new and probe_fell_behind_purge(checkpoint, storage, now, thresholds):
        findings.is_reconcile = True
        _read_listed_files(checkpoint, storage, findings, storage)


def _read_probed_files(checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings) -> None:
    _probe_next_offsets(checkpoint, storage, findings)
    _read_open_issue_offsets(checkpoint, storage, findings)
    _probe_commits(checkpoint, storage, findings)


def _probe_next_offsets(checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings) -> None:
    """Read the offsets files after the latest batch known, until one is missing (at most PROBE_LIMIT)."""
    first = 0 if checkpoint.latest_batch_id is None else checkpoint.latest_batch_id + 1
    for batch_id, entry in iter_next_entries(storage, read_offset_seq, first, limit=PROBE_LIMIT):
        if isinstance(entry, CheckpointError):
            findings.problems[f"offsets/{batch_id}"] = entry
        else:
            findings.new_offsets[batch_id] = entry


def _read_open_issue_offsets(checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings) -> None:
    """Offsets files of open issues have no row and probing starts past them: read them again."""
    for path in checkpoint.issues.open().filter(path__startswith="offsets/").values_list("path", flat=True):
        batch_id = int(path.removeprefix("offsets/"))
        if batch_id not in findings.new_offsets and path not in findings.problems:
            _collect(findings.new_offsets, findings, batch_id, path, read_offset_seq, storage, missing_ok=True)


def _probe_commits(checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings) -> None:
    """Read the commits of the batches read now and of those stored uncommitted after the latest commit."""
    # Spark never commits a batch older than its latest commit (it reruns the last planned batch
    # only), so a probe asks only for those after it; a reconcile would notice anything else.
    uncommitted = checkpoint.batches.uncommitted().filter(batch_id__gt=_latest_committed(checkpoint))
    wanted = sorted(set(findings.new_offsets) | set(uncommitted.values_list("batch_id", flat=True)))
    # Their names are known, so a catch-up after downtime reads them ahead on an object store.
    for source, window in _windows_read_ahead(storage, wanted, lambda batch_id: (f"commits/{batch_id}",)):
        for batch_id in window:
            _collect(
                findings.new_commits, findings, batch_id, f"commits/{batch_id}", read_commit, source, missing_ok=True
            )


def _latest_committed(checkpoint: Checkpoint) -> int:
    return -1 if checkpoint.latest_committed_batch_id is None else checkpoint.latest_committed_batch_id


def _read_listed_files(
    checkpoint: Checkpoint, storage: CheckpointStorage, findings: SyncFindings, lister: TreeListing | CheckpointStorage
) -> None:
    offset_ids = list_batch_ids(lister, "offsets")
    findings.earliest_batch_id = offset_ids[0] if offset_ids else None
    commit_ids = set(list_batch_ids(lister, "commits"))
    known = _known_batch_ids(checkpoint, offset_ids)
    new_ids = [batch_id for batch_id in offset_ids if batch_id not in known]
    del offset_ids, known
    for start in range(0, len(new_ids), RECONCILE_CHUNK_BATCHES):
        if findings.new_offsets:
            _store_chunk(checkpoint, findings)
        _read_batches(storage, findings, new_ids[start : start + RECONCILE_CHUNK_BATCHES], commit_ids)
    for batch_id in sorted(commit_ids & _uncommitted_batch_ids(checkpoint, commit_ids)):
        _collect(findings.new_commits, findings, batch_id, f"commits/{batch_id}", read_commit, storage)


def _read_batches(
    storage: CheckpointStorage, findings: SyncFindings, batch_ids: list[int], commit_ids: set[int]
) -> None:
    """Read offsets/N, and commits/N where listed, of each batch."""

    def files_of(batch_id: int) -> tuple[str, ...]:
        offsets = f"offsets/{batch_id}"
        return (offsets, f"commits/{batch_id}") if batch_id in commit_ids else (offsets,)

    for source, window in _windows_read_ahead(storage, batch_ids, files_of):
        for batch_id in window:
            _collect(findings.new_offsets, findings, batch_id, f"offsets/{batch_id}", read_offset_seq, source)
            if batch_id in commit_ids:
                _collect(findings.new_commits, findings, batch_id, f"commits/{batch_id}", read_commit, source)


def _windows_read_ahead(
    storage: CheckpointStorage, batch_ids: list[int], files_of: Callable[[int], tuple[str, ...]]
) -> Iterator[tuple[CheckpointStorage | ReadAhead, list[int]]]:
    """Yield (where to read them, batch ids) for windows of ``batch_ids``.

    On an object store each window's files (``files_of`` each batch) are fetched together with
    several GETs in flight (read_ahead); the window bounds what is held before parsing. Local
    files are read in turn, as they are asked for: one window of everything.
    """
    if not storage.reads_concurrently:
        yield storage, batch_ids
        return
    for start in range(0, len(batch_ids), READ_AHEAD_BATCHES):
        window = batch_ids[start : start + READ_AHEAD_BATCHES]
        yield read_ahead(storage, [path for batch_id in window for path in files_of(batch_id)]), window


@transaction.atomic
def _store_chunk(checkpoint: Checkpoint, findings: SyncFindings) -> None:
    """Store the batches read so far and forget them (a long reconcile; see RECONCILE_CHUNK_BATCHES)."""
    store_batches(checkpoint, findings.new_offsets, findings.new_commits)
    findings.stored_batches += len(findings.new_offsets)
    findings.stored_commits += len(findings.new_commits)
    findings.new_offsets.clear()
    findings.new_commits.clear()


def _collect(
    into: dict,
    findings: SyncFindings,
    batch_id: int,
    path: str,
    reader,
    storage: CheckpointStorage | ReadAhead,
    *,
    missing_ok: bool = False,
) -> None:
    """Read one log entry into ``into``; a file that cannot be read becomes a problem.

    With ``missing_ok`` a missing file is no problem: a probed commit not written yet, or an
    unreadable offsets file Spark has since purged (its issue then resolves).
    """
    try:
        into[batch_id] = reader(storage, batch_id)
    except MissingFileError as exc:
        if not missing_ok:
            findings.problems[path] = exc
    except CheckpointError as exc:
        findings.problems[path] = exc


def _find_query_id(storage: CheckpointStorage, findings: SyncFindings) -> str | None:
    try:
        metadata = find_stream_metadata(storage)
    except CheckpointError as exc:
        findings.problems["metadata"] = exc
        return None
    return None if metadata is None else metadata.id


def _known_batch_ids(checkpoint: Checkpoint, listed: list[int]) -> set[int]:
    if not listed:
        return set()
    rows = checkpoint.batches.filter(batch_id__gte=listed[0], batch_id__lte=listed[-1])
    return set(rows.values_list("batch_id", flat=True))


def _uncommitted_batch_ids(checkpoint: Checkpoint, commit_ids: set[int]) -> set[int]:
    if not commit_ids:
        return set()
    rows = checkpoint.batches.uncommitted().filter(batch_id__gte=min(commit_ids), batch_id__lte=max(commit_ids))
    return set(rows.values_list("batch_id", flat=True))
