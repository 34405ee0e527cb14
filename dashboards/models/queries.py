"""Streaming queries (the id Spark keeps in a checkpoint's `metadata`) and their runs (a runId per
start), known from the checkpoint and from progress events.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.db.models import Q
from django.utils import timezone


class StreamingQueryQuerySet(models.QuerySet):
    def claim_rollup_build(self, pk: int, *, now: datetime, seconds: int) -> bool:
        """Claim the build of the query's roll-ups unless they are built or another live worker
        holds it (a conditional UPDATE: workers on several machines never build one twice)."""
        free = Q(rollups_claimed_until__isnull=True) | Q(rollups_claimed_until__lt=now)
        claimed = self.filter(free, pk=pk, rollups_built=False).update(
            rollups_claimed_until=now + timedelta(seconds=seconds)
        )
        return claimed == 1


class StreamingQuery(models.Model):
    """A streaming query identity: the id Spark keeps in the checkpoint's `metadata` file."""

    query_id = models.UUIDField(unique=True)
    name = models.TextField(blank=True, help_text="From progress events (queryName), when known; any length.")
    first_seen_at = models.DateTimeField(default=timezone.now)
    # False while the Runtime charts' roll-ups of progress stored before they existed are to be
    # built (workers.rollup_builds): the charts say so instead of reading every row in a request.
    rollups_built = models.BooleanField(default=True, editable=False)
    rollups_through = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="While the Runtime roll-ups are built in chunks: the last batch id they cover so far.",
    )
    rollups_claimed_until = models.DateTimeField(null=True, blank=True, editable=False)

    objects = StreamingQueryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "streaming queries"

    def __str__(self) -> str:
        return self.name or str(self.query_id)


class QueryRunManager(models.Manager):
    def record_idle(self, query_id: str, run_id: str, moment: datetime) -> QueryRun:
        """Note that a run reported itself idle (Spark's QueryIdleEvent) at ``moment``."""
        query, _ = StreamingQuery.objects.get_or_create(query_id=query_id)
        run, _ = self.get_or_create(run_id=run_id, defaults={"query": query})
        if run.last_idle_at is None or moment > run.last_idle_at:
            run.last_idle_at = moment
            run.save(update_fields=["last_idle_at"])
        return run


class QueryRun(models.Model):
    """One start of a query (Spark's runId, new on every restart), known from progress events."""

    query = models.ForeignKey(StreamingQuery, on_delete=models.CASCADE, related_name="runs")
    run_id = models.UUIDField(unique=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    last_batch_id = models.BigIntegerField(
        null=True, blank=True, help_text="Newest batch this run reported progress for."
    )
    last_idle_at = models.DateTimeField(
        null=True, blank=True, help_text="Newest QueryIdleEvent of this run (no new data)."
    )

    objects = QueryRunManager()

    def __str__(self) -> str:
        return str(self.run_id)
