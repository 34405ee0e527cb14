"""Build the chart roll-ups of history stored before they existed, in a worker, never in a request.

A deployment upgraded with months of history has batches and progress but no roll-ups
(migration 0028 marks those owners not built). Building them reads every row once: the first
visitor of the query page must not pay that, so the charts say "building" while workers do it.
celery beat's ``build_missing_rollups`` (every minute) and each worker's start queue one task
per owner lacking them; ``manage.py build_rollups`` builds them during a deploy.

A build goes in chunks of about ``settings.ROLLUP_BUILD_CHUNK_BATCHES`` batch ids, one per task
run, so that no run holds a housekeeping worker long; a chunk's task queues the next, which any
machine may run. Each chunk commits its roll-ups with the last batch id it covered
(``Checkpoint.timeline_rollups_through``, ``StreamingQuery.rollups_through``) in one transaction,
so a build that dies is resumed where its last chunk ended, and the chunk that finds nothing
left marks the roll-ups built in the same transaction. A chunk locks its owner's row before it
reads rows, so two chunks of one owner never overlap even if a claim expired.

Workers on several machines may get the same owner: each chunk is claimed first with a
conditional UPDATE. A checkpoint's timeline chunks run under its sync lease; between them a sync
may store batches, and refreshes the roll-ups of those the build has passed (the next chunks read
the others). A query's Runtime chunks are claimed on the query's row; progress arrives through
the ingest API and the event log tailer meanwhile, and is refreshed the same way under the same
row lock (``refresh_runtime_rollups``).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from dashboards.models import Checkpoint, StreamingQuery
from dashboards.query_page.rollups import RolledSeries, build_chunk
from dashboards.query_page.runtime_series import rolled_series
from dashboards.query_page.timeline_rollups import TIMELINE_SERIES

logger = logging.getLogger(__name__)

# Many times a chunk's time (a few seconds); a crashed worker's claim expires after it.
BUILD_LEASE_SECONDS = 600
# What a chunk's run did: built the last chunk, built one with more to come, or did nothing
# (built already, or a sync or another builder holds the owner: beat asks again later).
BUILT, MORE, BUSY = "built", "more", "busy"


def owners_lacking_rollups() -> tuple[list[int], list[int]]:
    """The checkpoints whose timeline and the queries whose Runtime charts have roll-ups to build."""
    checkpoints = Checkpoint.objects.filter(timeline_rollups_built=False).order_by("pk").values_list("pk", flat=True)
    queries = StreamingQuery.objects.filter(rollups_built=False).order_by("pk").values_list("pk", flat=True)
    return list(checkpoints), list(queries)


def build_timeline_chunk(checkpoint_pk: int, *, now: datetime | None = None) -> str:
    """Build the next chunk of the checkpoint's timeline roll-ups under its sync lease."""
    now = now or timezone.now()
    owner = f"roll-ups {socket.gethostname()}:{os.getpid()}"
    if not Checkpoint.objects.take_lease(checkpoint_pk, owner=owner, now=now, seconds=BUILD_LEASE_SECONDS):
        return BUSY
    try:
        step = _build_step(Checkpoint, checkpoint_pk, "timeline_rollups", [TIMELINE_SERIES])
        _log_step(step, "timeline roll-ups of checkpoint", checkpoint_pk)
        return step
    finally:
        Checkpoint.objects.release_sync_lease(checkpoint_pk, owner=owner)


def build_runtime_chunk(query_pk: int, *, now: datetime | None = None) -> str:
    """Build the next chunk of the query's Runtime roll-ups under its claim."""
    now = now or timezone.now()
    if not StreamingQuery.objects.claim_rollup_build(query_pk, now=now, seconds=BUILD_LEASE_SECONDS):
        return BUSY
    try:
        step = _build_step(StreamingQuery, query_pk, "rollups", rolled_series())
        _log_step(step, "Runtime roll-ups of query", query_pk)
        return step
    finally:  # unless it lapsed and another worker holds it now
        mine = StreamingQuery.objects.filter(
            pk=query_pk, rollups_claimed_until=now + timedelta(seconds=BUILD_LEASE_SECONDS)
        )
        mine.update(rollups_claimed_until=None)


def _build_step(model: type[Model], pk: int, prefix: str, serieses: Iterable[RolledSeries]) -> str:
    """One chunk of the owner's build (fields ``<prefix>_built`` and ``<prefix>_through``) in one
    transaction, the owner's row locked first: its roll-ups and how far they go, or built."""
    built_field, through_field = f"{prefix}_built", f"{prefix}_through"
    owner_row = model.objects.filter(pk=pk)
    with transaction.atomic():
        state = owner_row.select_for_update().values_list(built_field, through_field).first()
        if state is None or state[0]:
            return BUSY
        serieses = list(serieses)
        through = build_chunk(serieses, pk, through=state[1], batches=settings.ROLLUP_BUILD_CHUNK_BATCHES)
        done = through is None or serieses[0].store.next_key(pk, through) is None
        owner_row.update(**{built_field: done, through_field: None if done else through})
    return BUILT if done else MORE


def _log_step(step: str, what: str, pk: int) -> None:
    if step != BUSY:
        logger.info("%s %s: %s", what, pk, "built" if step == BUILT else "one more chunk built")


def build_timeline_rollups(checkpoint_pk: int, *, now: datetime | None = None) -> bool:
    """Build the checkpoint's timeline roll-ups here, chunk after chunk; False when they are built
    already or a sync or another build holds the lease (beat asks again later)."""
    return _until_done(build_timeline_chunk, checkpoint_pk, now)


def build_runtime_rollups(query_pk: int, *, now: datetime | None = None) -> bool:
    """Build the query's Runtime roll-ups here, chunk after chunk; False when they are built
    already or another worker holds the build."""
    return _until_done(build_runtime_chunk, query_pk, now)


def _until_done(chunk, pk: int, now: datetime | None) -> bool:
    step = MORE
    while step == MORE:
        step = chunk(pk, now=now)
    return step == BUILT


def build_all_missing(*, now: datetime | None = None) -> dict[str, int]:
    """Build every owner's missing roll-ups here, one after the other (the management command)."""
    checkpoints, queries = owners_lacking_rollups()
    built = {"timelines": 0, "queries": 0, "busy": 0}
    for checkpoint_pk in checkpoints:
        done = build_timeline_rollups(checkpoint_pk, now=now)
        built["timelines" if done else "busy"] += 1
    for query_pk in queries:
        done = build_runtime_rollups(query_pk, now=now)
        built["queries" if done else "busy"] += 1
    return built
