"""Counting the state rows of a checkpoint with many partitions on several workers, then joining.

A full pass (workers.inspection) that finds more store directories than
CKPTWEB_STATE_FANOUT_PARTITIONS stores their file figures itself and starts a StateScan: the
operator partitions are split into chunks of CKPTWEB_STATE_FANOUT_CHUNK_PARTITIONS, one
StateScanChunk row and one `count_state_rows` task (state queue) each, queued by the sync's task
shell once the sync has committed. A chunk lists its own partition directories, counts their rows
at the scan's version and writes them. Claiming the
chunk row (done_at set only where it is still empty) makes a redelivered task a no-op, and the
chunk that brings chunks_done to chunks marks the scan finished: the join needs no result
backend, so it works on the embedded broker too. A chunk of a scan that a newer one superseded
skips the reading.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from dashboards.models import Checkpoint, StateScan, StateScanChunk, SyncRun
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.stateinventory import list_partition_stores
from workers.checkpoint.statesummary import StatePartitionSummary, state_conf, summarize_state_stores
from workers.checkpoint.storage.checkpointstorage import StorageCalls
from workers.state_partitions import refresh_state_totals, store_state_partitions, stored_state_commits
from workers.storage_options import open_storage

logger = logging.getLogger(__name__)


def fanout_needed(store_count: int) -> bool:
    """Tell whether a full pass hands the row counting of this many store directories to workers."""
    limit = settings.STATE_FANOUT_PARTITIONS
    return limit > 0 and store_count > limit


def partition_chunks(partitions: Iterable[StatePartitionSummary], size: int) -> list[list[list[int]]]:
    """The distinct [operator, partition] pairs, in order, cut into chunks of ``size``."""
    pairs = sorted({(summary.operator, summary.partition) for summary in partitions})
    return [[list(pair) for pair in pairs[start : start + size]] for start in range(0, len(pairs), size)]


def start_state_scan(
    checkpoint: Checkpoint, partitions: Sequence[StatePartitionSummary], version: int | None, now: datetime
) -> StateScan:
    """Create the scan and its chunks; the task shell that ran the sync queues them (chunks_to_count)."""
    chunks = partition_chunks(partitions, settings.STATE_FANOUT_CHUNK_PARTITIONS)
    scan = StateScan.objects.create(
        checkpoint=checkpoint,
        version=version,
        partitions=sum(len(chunk) for chunk in chunks),
        chunks=len(chunks),
        started_at=now,
    )
    StateScanChunk.objects.bulk_create(
        StateScanChunk(scan=scan, index=index, partitions=chunk) for index, chunk in enumerate(chunks)
    )
    return scan


def chunks_to_count(run: SyncRun) -> list[int]:
    """Ids of the chunks, not counted yet, of the scan that ``run``'s full pass started (none if it started none).

    The pass starts its scan at the run's start time; the task shell queues these chunks once the
    sync has committed, so that no plain function here imports the Celery tasks.
    """
    chunks = StateScanChunk.objects.filter(
        scan__checkpoint_id=run.checkpoint_id, scan__started_at=run.started_at, done_at__isnull=True
    )
    return list(chunks.order_by("scan_id", "index").values_list("pk", flat=True))


def count_state_chunk(chunk_id: int, *, worker: str = "", now: datetime | None = None) -> None:
    """Count the rows of one chunk's partitions and write them; join when it is the last chunk."""
    chunk = StateScanChunk.objects.select_related("scan__checkpoint").filter(pk=chunk_id).first()
    if chunk is None or chunk.done_at is not None:
        return  # deleted with its checkpoint, or a redelivered task
    scan = chunk.scan
    summaries, calls, errors = [], StorageCalls(), 0
    if not _superseded(scan):
        summaries, calls, errors = _read_chunk(scan.checkpoint, chunk.partitions, scan.version)
    _finish_chunk(chunk, summaries, calls, errors, worker, now or timezone.now())


def _superseded(scan: StateScan) -> bool:
    return StateScan.objects.filter(checkpoint_id=scan.checkpoint_id, started_at__gt=scan.started_at).exists()


def _read_chunk(
    checkpoint: Checkpoint, pairs: list[list[int]], version: int | None
) -> tuple[list[StatePartitionSummary], StorageCalls, int]:
    """Summaries of the chunk's store directories; storage that fails costs the chunk, not the scan."""
    storage = open_storage(checkpoint.url)
    try:
        stores = [
            store for operator, partition in pairs for store in list_partition_stores(storage, operator, partition)
        ]
        summaries = summarize_state_stores(
            storage,
            stores,
            version=version,
            conf=state_conf(checkpoint.batches.latest_conf()),
            commits=stored_state_commits(checkpoint),
            max_read_bytes=settings.STATE_ROWS_MAX_BYTES,
        )
    except CheckpointError as exc:
        logger.warning("state scan of %s: chunk %s not counted: %s", checkpoint, pairs, exc)
        return [], storage.calls, 1
    return summaries, storage.calls, 0


@transaction.atomic
def _finish_chunk(
    chunk: StateScanChunk,
    summaries: list[StatePartitionSummary],
    calls: StorageCalls,
    errors: int,
    worker: str,
    now: datetime,
) -> None:
    if not StateScanChunk.objects.filter(pk=chunk.pk, done_at__isnull=True).update(done_at=now, worker=worker):
        return  # another delivery of the same task got here first
    store_state_partitions(chunk.scan.checkpoint, summaries, now)
    refresh_state_totals(chunk.scan.checkpoint)
    scans = StateScan.objects.filter(pk=chunk.scan_id)
    scans.update(
        chunks_done=F("chunks_done") + 1,
        list_calls=F("list_calls") + calls.list,
        info_calls=F("info_calls") + calls.info,
        read_calls=F("read_calls") + calls.read,
        bytes_read=F("bytes_read") + calls.bytes_read,
        error_count=F("error_count") + errors,
    )
    scans.filter(chunks_done=F("chunks"), finished_at__isnull=True).update(finished_at=now)
