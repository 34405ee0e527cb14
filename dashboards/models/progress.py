"""Runtime metrics per batch: StreamingQueryProgress events, from the listener or event logs.

A progress row belongs to a query (the id in the checkpoint's ``metadata``) and a batch id, which
is how it meets the Batch rows of that query's checkpoint. A batch re-run after a restart reports
again under a new run id: the newest report replaces the older one.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from django.db import models, transaction
from django.db.models import OuterRef, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from dashboards.models.core import Checkpoint
from dashboards.models.queries import QueryRun, StreamingQuery

if TYPE_CHECKING:
    from workers.checkpoint.progress import StateOperatorProgress, StreamingQueryProgress

# HDFSBackedStateStoreProvider's custom metrics: loads served from its cache of recent versions.
CACHE_HITS = "loadedMapCacheHitCount"
CACHE_MISSES = "loadedMapCacheMissCount"
# The largest batch id (a BIGINT): no ceiling on the progress a checkpoint owns.
NO_CEILING = 2**63 - 1
# StateOperatorProgress fields stored as columns, by their Python names.
STATE_OPERATOR_FIGURES = (
    "num_rows_total",
    "num_rows_updated",
    "num_rows_removed",
    "num_rows_dropped_by_watermark",
    "memory_used_bytes",
    "num_shuffle_partitions",
    "num_state_store_instances",
    "commit_time_ms",
    "all_updates_time_ms",
    "all_removals_time_ms",
)


class BatchProgressManager(models.Manager):
    @transaction.atomic
    def store(self, progress: StreamingQueryProgress, *, origin: str) -> tuple[BatchProgress, bool]:
        """Insert or replace the progress of (query id, batch id); return it and whether it is new."""
        query, _ = StreamingQuery.objects.get_or_create(query_id=progress.id)
        if progress.name and query.name != progress.name:
            query.name = progress.name
            query.save(update_fields=["name"])
        run, _ = QueryRun.objects.get_or_create(run_id=progress.run_id, defaults={"query": query})
        if run.last_batch_id is None or progress.batch_id > run.last_batch_id:
            run.last_batch_id = progress.batch_id
            run.save(update_fields=["last_batch_id"])
        row, created = self.update_or_create(
            query=query, batch_id=progress.batch_id, defaults=_progress_fields(progress, run, origin)
        )
        row.state_operators.all().delete()
        StateOperatorMetrics.objects.bulk_create(
            _operator_row(row, index, operator) for index, operator in enumerate(progress.state_operators)
        )
        _store_source_lags(row, progress)
        return row, created


class BatchProgressQuerySet(models.QuerySet):
    def owned_by(self, checkpoint) -> BatchProgressQuerySet:
        """The progress that is ``checkpoint``'s; it must come from CheckpointQuerySet.with_progress_owner."""
        owned = self.filter(query_id=checkpoint.query_id)
        if checkpoint.progress_ceiling is None:
            return owned
        return owned.filter(batch_id__lte=checkpoint.progress_ceiling)

    def owned_by_outer_checkpoint(self) -> BatchProgressQuerySet:
        """owned_by in a subquery of CheckpointQuerySet.with_progress_owner: OuterRef's checkpoint's progress."""
        ceiling = Coalesce(OuterRef("progress_ceiling"), Value(NO_CEILING))
        return self.filter(query=OuterRef("query"), batch_id__lte=ceiling)

    def for_query(self, query_id) -> BatchProgressQuerySet:
        return self.filter(query_id=query_id).order_by("batch_id")

    def for_batch(self, query_id, batch_id: int) -> BatchProgress | None:
        """The progress of one batch of a query, with its state operators, or None."""
        if query_id is None:
            return None
        return self.filter(query_id=query_id, batch_id=batch_id).prefetch_related("state_operators").first()

    def table_figures(self, query_id, batch_ids: list[int]) -> dict[int, dict]:
        """Batch id -> duration, input rows, rates and offsets behind head of those batches of a query
        that have progress (one query)."""
        if query_id is None or not batch_ids:
            return {}
        rows = self.filter(query_id=query_id, batch_id__in=batch_ids).values(
            "batch_id",
            "batch_duration_ms",
            "num_input_rows",
            "input_rows_per_second",
            "processed_rows_per_second",
            "offsets_behind",
        )
        return {row["batch_id"]: row for row in rows}


class BatchProgress(models.Model):
    """One trigger's StreamingQueryProgress."""

    class Origin(models.TextChoices):
        LISTENER = "listener", "progress listener"
        EVENT_LOG = "event-log", "Spark event log"

    query = models.ForeignKey(StreamingQuery, on_delete=models.CASCADE, related_name="progress")
    run = models.ForeignKey(QueryRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="progress")
    batch_id = models.BigIntegerField()
    timestamp = models.DateTimeField(help_text="Start of the trigger.")
    batch_duration_ms = models.BigIntegerField(null=True, blank=True)
    duration_ms = models.JSONField(
        default=dict, blank=True, help_text="Milliseconds per phase (addBatch, walCommit, ...)."
    )
    num_input_rows = models.BigIntegerField(null=True, blank=True)
    input_rows_per_second = models.FloatField(null=True, blank=True)
    processed_rows_per_second = models.FloatField(null=True, blank=True)
    watermark = models.DateTimeField(null=True, blank=True)
    event_time = models.JSONField(default=dict, blank=True, help_text="min/max/avg/watermark as ISO-8601 UTC.")
    sources = models.JSONField(default=list, blank=True)
    sink = models.JSONField(null=True, blank=True)
    offsets_behind = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Offsets waiting at the sources' heads after the trigger, summed over the sources "
        "that report it (workers/checkpoint/lag.py); empty when none does.",
    )
    origin = models.CharField(max_length=10, choices=Origin.choices)
    received_at = models.DateTimeField(default=timezone.now)

    objects = BatchProgressManager.from_queryset(BatchProgressQuerySet)()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["query", "batch_id"], name="one_progress_per_batch")]
        # A run's extent and its newest batches (dashboards/query_page/run_summary.py) without a scan of the query.
        indexes = [models.Index(fields=["run", "batch_id"], name="progress_of_run")]
        permissions = [("ingest_progress", "Can send progress events to the ingest endpoint")]
        verbose_name_plural = "batch progress"

    def __str__(self) -> str:
        return f"{self.query} batch {self.batch_id}"


class StateOperatorMetrics(models.Model):
    """One stateful operator's figures in one trigger (StateOperatorProgress)."""

    progress = models.ForeignKey(BatchProgress, on_delete=models.CASCADE, related_name="state_operators")
    operator_index = models.PositiveSmallIntegerField()
    # Text, not a bounded CharField: a name is stored as Spark reported it, however long.
    operator_name = models.TextField(blank=True)
    num_rows_total = models.BigIntegerField(null=True, blank=True)
    num_rows_updated = models.BigIntegerField(null=True, blank=True)
    num_rows_removed = models.BigIntegerField(null=True, blank=True)
    num_rows_dropped_by_watermark = models.BigIntegerField(null=True, blank=True)
    memory_used_bytes = models.BigIntegerField(null=True, blank=True)
    num_shuffle_partitions = models.BigIntegerField(null=True, blank=True)
    num_state_store_instances = models.BigIntegerField(null=True, blank=True)
    commit_time_ms = models.BigIntegerField(null=True, blank=True)
    all_updates_time_ms = models.BigIntegerField(null=True, blank=True)
    all_removals_time_ms = models.BigIntegerField(null=True, blank=True)
    custom_metrics = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["progress", "operator_index"], name="one_row_per_operator")]
        ordering = ["operator_index"]
        verbose_name_plural = "state operator metrics"

    @property
    def cache_hit_ratio(self) -> float | None:
        """loadedMapCacheHitCount / (hits + misses) of the HDFS provider, None without lookups."""
        return cache_hit_ratio(self.custom_metrics.get(CACHE_HITS), self.custom_metrics.get(CACHE_MISSES))


def cache_hit_ratio(hits: int | None, misses: int | None) -> float | None:
    """Share of state loads served from the provider's in-memory cache; None without lookups."""
    if hits is None or misses is None or hits + misses == 0:
        return None
    return hits / (hits + misses)


def _progress_fields(progress: StreamingQueryProgress, run: QueryRun, origin: str) -> dict:
    return {
        "run": run,
        "timestamp": progress.timestamp,
        "batch_duration_ms": progress.batch_duration_ms,
        "duration_ms": dict(progress.duration_ms),
        "num_input_rows": progress.num_input_rows,
        "input_rows_per_second": progress.input_rows_per_second,
        "processed_rows_per_second": progress.processed_rows_per_second,
        "watermark": progress.watermark,
        "event_time": {key: value.isoformat() for key, value in progress.event_time.items()},
        "sources": [_plain(source) for source in progress.sources],
        "sink": None if progress.sink is None else _plain(progress.sink),
        "offsets_behind": _offsets_behind(progress),
        "origin": origin,
        "received_at": timezone.now(),
    }


def _store_source_lags(row: BatchProgress, progress: StreamingQueryProgress) -> None:
    """Replace the batch's per-source lag rows (a re-run after a restart reports again)."""
    row.source_lags.all().delete()
    SourceLagMetrics.objects.bulk_create(
        SourceLagMetrics(
            progress=row,
            source_index=index,
            description=source.description or "",
            offsets_behind=source.lag.offsets_behind,
            basis=source.lag.basis.value,
        )
        for index, source in enumerate(progress.sources)
    )


def _offsets_behind(progress: StreamingQueryProgress) -> int | None:
    """The sources' lags summed, over those that report one; None when none does."""
    reported = [source.lag.offsets_behind for source in progress.sources if source.lag.offsets_behind is not None]
    return sum(reported) if reported else None


def _operator_row(row: BatchProgress, index: int, operator: StateOperatorProgress) -> StateOperatorMetrics:
    figures = {name: getattr(operator, name) for name in STATE_OPERATOR_FIGURES}
    return StateOperatorMetrics(
        progress=row,
        operator_index=index,
        operator_name=operator.operator_name or "",
        custom_metrics=dict(operator.custom_metrics),
        **figures,
    )


def _plain(value) -> dict:
    """A frozen slotted dataclass as a JSON-ready dict."""
    return asdict(value)


class SourceLagMetricsQuerySet(models.QuerySet):
    def for_query(self, query_id) -> SourceLagMetricsQuerySet:
        """Every source's lag of every reported batch of a query, oldest batch first."""
        return self.filter(progress__query_id=query_id).order_by("progress__batch_id", "source_index")


class SourceLagMetrics(models.Model):
    """How far one source was behind its head after one trigger (SourceProgress, see workers/checkpoint/lag.py)."""

    class Basis(models.TextChoices):
        KAFKA_METRICS = "kafka-metrics", "Kafka's offsets-behind-latest metrics"
        OFFSETS = "offsets", "latestOffset minus endOffset"
        NOT_REPORTED = "not-reported", "not reported by the source"

    progress = models.ForeignKey(BatchProgress, on_delete=models.CASCADE, related_name="source_lags")
    source_index = models.PositiveSmallIntegerField()
    description = models.TextField(blank=True, help_text="The source's description, as Spark reported it.")
    offsets_behind = models.BigIntegerField(
        null=True, blank=True, help_text="Offsets at the head beyond the trigger's end, in the source's own unit."
    )
    basis = models.CharField(max_length=20, choices=Basis.choices)

    objects = SourceLagMetricsQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["progress", "source_index"], name="one_lag_per_source")]
        ordering = ["source_index"]
        verbose_name_plural = "source lag metrics"


class EventLogDirectory(models.Model):
    """A ``spark.eventLog.dir`` whose streaming-query progress the workers tail.

    ``positions`` maps each event log's name to how far it was read (EventLogPosition.as_dict),
    so a tail reads only what Spark appended since; ``errors`` maps a log's name to why its last
    tail failed (the other logs are read regardless).
    """

    name = models.CharField(max_length=200, unique=True)
    url = models.CharField(max_length=1000, unique=True, help_text="Local path or fsspec URL of spark.eventLog.dir.")
    is_enabled = models.BooleanField("enabled", default=True)
    positions = models.JSONField(default=dict, blank=True, editable=False)
    errors = models.JSONField(default=dict, blank=True, editable=False)
    last_tailed_at = models.DateTimeField(null=True, blank=True, editable=False)
    progress_events_read = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        verbose_name_plural = "event log directories"

    def __str__(self) -> str:
        return self.name


class RollupBucket(models.Model):
    """One bucket of 2**tier batch ids of a chart series: its first and last batch id and, per
    plotted value, its minimum and maximum with the lowest batch id holding each."""

    series = models.CharField(max_length=20)
    part = models.IntegerField(help_text="The operator or source index; 0 for a query-wide series.")
    tier = models.PositiveSmallIntegerField()
    bucket = models.BigIntegerField(help_text="The batch ids from bucket * 2**tier to (bucket + 1) * 2**tier - 1.")
    first_key = models.BigIntegerField()
    last_key = models.BigIntegerField()
    extremes = models.JSONField(help_text="Per plotted value: [min, its batch id, max, its batch id], or null.")

    class Meta:
        abstract = True


class ChartRollup(RollupBucket):
    """A bucket of one Runtime chart series of a query.

    Kept as progress is stored (dashboards/query_page/rollups.py), so a chart of any history
    reads a few hundred of these and the rows they name, not every row of the query.
    """

    query = models.ForeignKey(StreamingQuery, on_delete=models.CASCADE, related_name="chart_rollups")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["query", "series", "tier", "bucket", "part"], name="one_rollup_per_bucket")
        ]


class TimelineRollup(RollupBucket):
    """A bucket of a checkpoint's batch timeline (its Batch rows, not a query's progress).

    Kept as the sync stores batches and commits (dashboards/query_page/timeline_rollups.py).
    """

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="timeline_rollups")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "series", "tier", "bucket", "part"], name="one_timeline_rollup_per_bucket"
            )
        ]
