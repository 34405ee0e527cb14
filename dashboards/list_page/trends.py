"""The list's small trend per row: batch duration per minute over the last hour, from one query.

One grouped statement for a whole page of checkpoints reads the progress of the last hour, each
checkpoint's batches only (up to its own latest batch, so a copy of a checkpoint does not draw
the live query's line), and averages batchDurationMs per minute. An index range on the unique
(query, batch_id) bounds what it reads: at most TREND_MAX_BATCHES batches before each latest.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from operator import or_

from django.core.cache import cache
from django.db.models import Avg, Q
from django.db.models.functions import TruncMinute

from dashboards.models import BatchProgress

TREND_MINUTES = 60
# A trigger of 1 s gives 3,600 batches an hour; faster queries show their newest hour's tail.
TREND_MAX_BATCHES = 3_600
TREND_CACHE_SECONDS = 60


@dataclass(frozen=True, slots=True)
class Trend:
    """Average batch duration (ms) per minute, oldest first; minutes without batches are absent."""

    points: tuple[tuple[int, float], ...]  # (minutes since the start of the window, value)
    minutes: int

    @property
    def low(self) -> float:
        return min(value for _, value in self.points)

    @property
    def high(self) -> float:
        return max(value for _, value in self.points)


def duration_trends(checkpoints: Iterable[dict], *, now: datetime) -> dict[int, Trend]:
    """Checkpoint id -> its Trend, for the checkpoints (the list's rows: id, query_id and
    latest_batch_id) with progress in the last TREND_MINUTES.

    Kept in the shared cache for the rest of the minute, per page of checkpoints and their latest
    batches: the list refreshes every 10 s, and a trend's points are whole minutes.
    """
    checkpoints = list(checkpoints)
    minute = now.replace(second=0, microsecond=0)
    version = (minute.isoformat(), tuple((c["id"], c["query_id"], c["latest_batch_id"]) for c in checkpoints))
    digest = hashlib.blake2b(repr(version).encode(), digest_size=16).hexdigest()
    return cache.get_or_set(f"trends:{digest}", lambda: _read_trends(checkpoints, minute=minute), TREND_CACHE_SECONDS)


def _read_trends(checkpoints: list[dict], *, minute: datetime) -> dict[int, Trend]:
    """Checkpoints that share a query id (a copy) go to separate statements, one per copy: a page
    normally needs one."""
    rounds: list[dict[int, object]] = []
    for checkpoint in checkpoints:
        query = checkpoint["query_id"]
        if query is None or checkpoint["latest_batch_id"] is None:
            continue
        free = next((batch for batch in rounds if query not in batch), None)
        if free is None:
            rounds.append(free := {})
        free[query] = checkpoint
    trends = {}
    for batch in rounds:
        trends.update(_trends_of(batch, start=minute - timedelta(minutes=TREND_MINUTES)))
    return trends


def _trends_of(by_query: dict[int, dict], *, start: datetime) -> dict[int, Trend]:
    rows = (
        BatchProgress.objects.filter(_own_batches(by_query), timestamp__gte=start, batch_duration_ms__isnull=False)
        .annotate(minute=TruncMinute("timestamp"))
        .values("query_id", "minute")
        .annotate(duration=Avg("batch_duration_ms"))
        .order_by("query_id", "minute")
    )
    points: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        points[row["query_id"]].append((int((row["minute"] - start).total_seconds() // 60), float(row["duration"])))
    return {by_query[query]["id"]: Trend(tuple(values), TREND_MINUTES) for query, values in points.items()}


def _own_batches(by_query: dict[int, dict]) -> Q:
    """Each query's newest TREND_MAX_BATCHES batches up to its checkpoint's latest batch."""
    return reduce(
        or_,
        (
            Q(
                query_id=query,
                batch_id__gt=checkpoint["latest_batch_id"] - TREND_MAX_BATCHES,
                batch_id__lte=checkpoint["latest_batch_id"],
            )
            for query, checkpoint in by_query.items()
        ),
    )
