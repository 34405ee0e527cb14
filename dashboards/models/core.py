"""Checkpoints, their batches, and the syncs that read them.

Only the sync worker writes Batch, SyncRun and SyncIssue rows; views read them through the named
QuerySet methods below.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import connections, models
from django.db.models import BigIntegerField, Case, F, OuterRef, Q, Subquery, When
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from dashboards.health.query_status import StatusFacts
from dashboards.maintenance_page.figures import LogFigures, MaintenanceFigures, StoreFigures
from dashboards.models.severity import SEVERITY_ERROR, SEVERITY_WARNING
from dashboards.schedules import schedule_sync, unschedule_sync
from workers.checkpoint.maintenance.actions import SINK_LOG as SINK_LOG_CHOICE
from workers.checkpoint.metadatalog import DEFAULT_COMPACT_INTERVAL


def default_sync_interval_seconds() -> int:
    return settings.SYNC_INTERVAL_SECONDS


def ms_to_datetime(value_ms: int | None) -> datetime | None:
    """Spark writes times as epoch milliseconds; 0 means "not set" in the offset log."""
    if not value_ms:
        return None
    return datetime.fromtimestamp(value_ms / 1000, tz=UTC)


# A checkpoint is flagged stale when its last sync is older than this many sync intervals, plus
# a grace for the sync's own duration.
SYNC_OVERDUE_INTERVALS = 3
SYNC_OVERDUE_GRACE_SECONDS = 60


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


def count_per_checkpoint(rows: models.QuerySet) -> Coalesce:
    """Count the ``rows`` of each checkpoint in a correlated subquery of the select list."""
    counted = rows.filter(checkpoint=OuterRef("pk")).order_by().values("checkpoint").annotate(count=models.Count("pk"))
    return Coalesce(Subquery(counted.values("count")), 0)


def _last_heard(progress_at: datetime | None, input_rows: int | None, idle_at: datetime | None) -> dict[str, Any]:
    """The newest sign of life: a progress (with its input rows) or an idle event (no input)."""
    if idle_at is not None and (progress_at is None or idle_at > progress_at):
        return {"last_heard_at": idle_at, "last_heard_input_rows": 0}
    return {"last_heard_at": progress_at, "last_heard_input_rows": input_rows}


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000


# What the checkpoint list shows of a checkpoint besides the health model's figures.
LIST_FIELDS = (
    "id",
    "name",
    "url",
    "query_id",
    "last_inspected_at",
    "state_rows",
    "state_bytes",
    "state_providers",
    "finding_warning_count",
    "copy_of_id",
)
# The columns and CheckpointQuerySet.with_status_facts annotations the health model reads.
STATUS_FACT_FIELDS = (
    "is_enabled",
    "root_problem",
    "sync_interval_seconds",
    "last_synced_at",
    "last_sync_status",
    "last_sync_message",
    "open_issue_count",
    "finding_error_count",
    "latest_batch_id",
    "latest_batch_at",
    "latest_committed_batch_id",
    "expected_trigger_seconds",
    "trigger_interval_ms",
    "typical_gap_ms",
    "recent_batch_duration_ms",
    "recent_input_rate",
    "recent_process_rate",
    "recent_offsets_behind",
    "earlier_offsets_behind",
    "last_heard_at",
    "last_heard_input_rows",
    "last_idle_at",
    "copy_of_name",
    "copy_of_batch_id",
    "created_at",
)


def status_facts_of(row: Mapping[str, Any]) -> StatusFacts:
    """The health model's input from a checkpoint's STATUS_FACT_FIELDS: a model instance's or a
    plain row's (CheckpointQuerySet.status_list_rows), so both are judged alike."""
    return StatusFacts(
        is_enabled=row["is_enabled"],
        root_problem=row["root_problem"],
        sync_interval_seconds=row["sync_interval_seconds"],
        last_synced_at=row["last_synced_at"],
        last_sync_failed=row["last_sync_status"] == SyncRun.Status.FAILED,
        last_sync_message=row["last_sync_message"] or "",
        unreadable_files=row["open_issue_count"],
        error_findings=row["finding_error_count"],
        latest_batch_id=row["latest_batch_id"],
        latest_batch_at=row["latest_batch_at"],
        latest_committed_batch_id=row["latest_committed_batch_id"],
        trigger_interval_seconds=row["expected_trigger_seconds"] or _seconds(row["trigger_interval_ms"]),
        typical_gap_seconds=_seconds(row["typical_gap_ms"]),
        recent_batch_duration_seconds=_seconds(row["recent_batch_duration_ms"]),
        recent_input_rate=row["recent_input_rate"],
        recent_process_rate=row["recent_process_rate"],
        recent_offsets_behind=row["recent_offsets_behind"],
        earlier_offsets_behind=row["earlier_offsets_behind"],
        **_last_heard(row["last_heard_at"], row["last_heard_input_rows"], row["last_idle_at"]),
        copy_of=row["copy_of_name"] or "",
        copy_of_batch_id=row["copy_of_batch_id"],
        registered_at=row["created_at"],
    )


class CheckpointQuerySet(models.QuerySet):
    def status_list_rows(self) -> CheckpointQuerySet:
        """The list's rows as plain dicts: the health model's figures (STATUS_FACT_FIELDS) and what
        the list shows, filters and sorts on. No model instances: 1,000 of them cost more than the query."""
        return (
            self.active()
            .with_status_facts()
            .values(*STATUS_FACT_FIELDS, *LIST_FIELDS, query_name=F("query__name"), query_uuid=F("query__query_id"))
        )

    def active(self) -> CheckpointQuerySet:
        """Checkpoints not archived: the ones synced, listed and exported to /metrics."""
        return self.filter(archived_at__isnull=True)

    def archived(self) -> CheckpointQuerySet:
        """Archived checkpoints, most recently archived first."""
        return self.filter(archived_at__isnull=False).order_by("-archived_at", "name")

    def with_progress_owner(self) -> CheckpointQuerySet:
        """Annotate which of its query's progress is this checkpoint's: the one rule of ownership.

        Progress names a query id, not a checkpoint, and two registered checkpoints can share one:
        a copy of a live checkpoint, a restored backup. Their histories are one up to where the
        copy was taken. The checkpoint furthest ahead owns all of its query's progress, so a live
        query's charts do not wait for the next sync; on a tie the first registered does (a copy
        registered seconds after it was taken is level with its original until the original's
        next sync). Every other one is a copy: it owns the progress of the batches it has written,
        never of a batch it did not run.

        ``copy_of_id``, ``copy_of_name``, ``copy_of_batch_id``: the checkpoint that owns the rest,
        None when this one owns all. ``progress_ceiling``: the newest batch whose progress is this
        checkpoint's, None for all. ``heard_ceiling``: the newest batch whose progress says this
        checkpoint's query is alive: its own batches and the one being planned (an idle query's
        events carry the next batch id), a copy's own batches only; progress past it may be of
        batches not synced yet, which the health model does not count.
        """
        latest = OuterRef("latest_batch_id")
        ahead = (
            self.model.objects.active()
            .filter(Q(latest_batch_id__gt=latest) | Q(latest_batch_id=latest, pk__lt=OuterRef("pk")))
            .filter(query=OuterRef("query"))
            .order_by("-latest_batch_id", "pk")
        )
        is_copy = Q(copy_of_id__isnull=False)
        return self.annotate(
            copy_of_id=Subquery(ahead.values("pk")[:1]),
            copy_of_name=Subquery(ahead.values("name")[:1]),
            copy_of_batch_id=Subquery(ahead.values("latest_batch_id")[:1]),
            progress_ceiling=Case(
                When(is_copy, then=F("latest_batch_id")), default=None, output_field=BigIntegerField()
            ),
            heard_ceiling=Case(When(is_copy, then=F("latest_batch_id")), default=F("latest_batch_id") + 1),
        )

    def with_status_facts(self) -> CheckpointQuerySet:
        """Annotate what the health model needs beyond the row's own columns, one subquery each.

        Each subquery is an index lookup per checkpoint: the newest finished sync (sync_run_recent),
        open issue and error finding counts, the checkpoint ahead of it when it is a copy, and the
        newest progress up to its heard_ceiling (with_progress_owner).
        """
        findings = self.model._meta.get_field("findings").related_model.objects.open()
        finished = SyncRun.objects.filter(checkpoint=OuterRef("pk"), finished_at__isnull=False).order_by("-started_at")
        progress_model = self.model._meta.get_field("query").related_model._meta.get_field("progress").related_model
        heard = progress_model.objects.filter(
            query=OuterRef("query"), batch_id__lte=OuterRef("heard_ceiling")
        ).order_by("-batch_id")
        # A run idle at this checkpoint's head: one that reported no batch past it.
        idle_runs = QueryRun.objects.filter(
            query=OuterRef("query"), last_batch_id__lte=OuterRef("heard_ceiling"), last_idle_at__isnull=False
        ).order_by("-last_idle_at")
        return self.with_progress_owner().annotate(
            open_issue_count=count_per_checkpoint(SyncIssue.objects.open()),
            finding_error_count=count_per_checkpoint(findings.filter(severity=SEVERITY_ERROR)),
            finding_warning_count=count_per_checkpoint(findings.filter(severity=SEVERITY_WARNING)),
            last_sync_status=Subquery(finished.values("status")[:1]),
            last_sync_message=Subquery(finished.values("message")[:1]),
            last_heard_at=Subquery(heard.values("timestamp")[:1]),
            last_heard_input_rows=Subquery(heard.values("num_input_rows")[:1]),
            last_idle_at=Subquery(idle_runs.values("last_idle_at")[:1]),
        )

    def maintenance_figures(self, checkpoint: Checkpoint) -> MaintenanceFigures:
        """What the maintenance form's defaults and previews are computed from (six small queries).

        The oldest batch is the one the last reconcile listed (Batch rows outlive Spark's purge);
        the oldest state version and each log's oldest batch come from the latest inventory pass.
        """
        inventory = {
            row["path"]: row
            for row in checkpoint.inventory.latest_for(checkpoint).values("path", "kind", "oldest_batch_id")
        }
        state_batches = [
            row["oldest_batch_id"]
            for row in inventory.values()
            if row["kind"] == "state" and row["oldest_batch_id"] is not None
        ]
        offsets_row = inventory.get("offsets", {})
        return MaintenanceFigures(
            conf=checkpoint.batches.latest_conf(),
            oldest_batch_id=_first_not_none(checkpoint.earliest_stored_batch_id, offsets_row.get("oldest_batch_id")),
            latest_batch_id=checkpoint.latest_batch_id,
            latest_committed_batch_id=checkpoint.latest_committed_batch_id,
            # An inventory row of state names the batch that wrote its oldest version (version - 1).
            oldest_state_version=min(state_batches) + 1 if state_batches else None,
            stores=tuple(
                StoreFigures(p.path, p.provider, p.latest_version, p.snapshot_age)
                for p in checkpoint.state_partitions.order_by("operator", "partition", "store")
            ),
            logs=tuple(
                _log_figures(log, inventory) for log in checkpoint.metadata_logs.prefetch_related("compact_files")
            ),
        )

    def take_sync_lease(self, pk: int, *, owner: str, now: datetime, seconds: int) -> bool:
        """Lock the checkpoint for one sync; False when another live worker holds it or it is archived.

        A conditional UPDATE, so two workers racing for the same checkpoint cannot both win; a
        crashed worker's lease simply expires. An archived checkpoint is never synced, whoever
        queued the sync (a catch-up of the read API, a sync queued just before archiving).
        """
        return self.active().take_lease(pk, owner=owner, now=now, seconds=seconds)

    def take_lease(self, pk: int, *, owner: str, now: datetime, seconds: int) -> bool:
        """The sync lease of any checkpoint of this queryset (an archived one too: a roll-up build
        takes it so that no sync stores batches meanwhile)."""
        free = Q(sync_lease_until__isnull=True) | Q(sync_lease_until__lt=now)
        taken = self.filter(free, pk=pk).update(
            sync_lease_owner=owner, sync_lease_until=now + timedelta(seconds=seconds)
        )
        return taken == 1

    def release_sync_lease(self, pk: int, *, owner: str) -> None:
        self.filter(pk=pk, sync_lease_owner=owner).update(sync_lease_owner="", sync_lease_until=None)


def _first_not_none(*values: int | None) -> int | None:
    return next((value for value in values if value is not None), None)


def _log_figures(log, inventory: dict[str, dict[str, Any]]) -> LogFigures:
    """A MetadataLog row (with its compact files prefetched) and its inventory row as LogFigures."""
    return LogFigures(
        choice=SINK_LOG_CHOICE if log.kind == "sink" else log.path,
        path=log.path,
        compact_interval=log.compact_interval,
        latest_batch_id=log.latest_batch_id,
        oldest_batch_id=inventory.get(log.path, {}).get("oldest_batch_id"),
        compact_batch_ids=frozenset(f.batch_id for f in log.compact_files.all()),
    )


class Checkpoint(models.Model):
    """A checkpoint location registered for observation, and what the last sync found there."""

    name = models.CharField(max_length=200, unique=True)
    url = models.CharField(
        max_length=1000,
        unique=True,
        help_text="Local path or fsspec URL of the checkpoint root (the folder holding offsets/).",
    )
    is_enabled = models.BooleanField("enabled", default=True, help_text="Disabled checkpoints are not synced.")
    sync_interval_seconds = models.PositiveIntegerField(default=default_sync_interval_seconds)
    sink_log_url = models.CharField(
        "file sink output",
        max_length=1000,
        blank=True,
        help_text="Output directory of a file sink: its _spark_metadata log lives there, outside the checkpoint.",
    )
    file_log_compact_interval = models.PositiveIntegerField(
        "file log compact interval",
        default=DEFAULT_COMPACT_INTERVAL,
        validators=[MinValueValidator(1)],
        help_text="The query's spark.sql.streaming.fileSink/fileSource.log.compactInterval. "
        "Spark does not write it into the checkpoint; it applies until a log has a .compact file, "
        "after which the interval is derived from the files.",
    )
    expected_trigger_seconds = models.PositiveIntegerField(
        "trigger interval (seconds)",
        null=True,
        blank=True,
        help_text="The query's ProcessingTime trigger, if you want batches longer than it reported as falling behind. "
        "Empty: learned from the batches (regular gaps in which batches finished early).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Set when archived: not synced, not listed, not in /metrics; "
        "its history stays and it can be restored.",
    )
    query = models.ForeignKey(
        StreamingQuery, null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoints"
    )
    sync_schedule = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        editable=False,
        related_name="+",
    )

    # Written by the sync worker only: the health figures the list page shows without touching Batch.
    latest_batch_id = models.BigIntegerField(null=True, blank=True, editable=False)
    latest_batch_at = models.DateTimeField(null=True, blank=True, editable=False)
    latest_committed_batch_id = models.BigIntegerField(null=True, blank=True, editable=False)
    uncommitted_batch_count = models.PositiveIntegerField(default=0, editable=False)
    last_synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_inspected_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Last full walk: file inventory, integrity checks, metadata logs, state stores.",
    )
    last_probed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Last probe of the compactible logs and state stores between full walks (or the last walk).",
    )
    full_walk_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Someone asked for a full walk on the query page; the next sync runs it and clears this.",
    )
    last_inspected_batch_id = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Newest batch (offsets/N) the last full pass saw: what its figures are as of.",
    )
    last_reconciled_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Last sync that listed offsets/ and commits/ instead of probing.",
    )
    earliest_stored_batch_id = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Lowest offsets/N on storage at the last reconcile (Spark purges older ones).",
    )

    # Written by the sync worker: the figures of the health model (dashboards/health/query_status.py).
    root_problem = models.CharField(
        max_length=1000,
        blank=True,
        editable=False,
        help_text="What the last sync found at the path when it is no checkpoint.",
    )
    trigger_interval_ms = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Trigger interval learned from regular gaps between batches that finished early.",
    )
    typical_gap_ms = models.BigIntegerField(
        null=True, blank=True, editable=False, help_text="Median gap between the latest batches."
    )
    recent_batch_duration_ms = models.BigIntegerField(
        null=True, blank=True, editable=False, help_text="Median batchDurationMs of the latest batches with progress."
    )
    recent_input_rate = models.FloatField(
        null=True, blank=True, editable=False, help_text="Mean inputRowsPerSecond of the latest batches."
    )
    recent_process_rate = models.FloatField(
        null=True, blank=True, editable=False, help_text="Mean processedRowsPerSecond of the latest batches."
    )
    recent_offsets_behind = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Offsets behind the sources' heads at the newest of the latest batches that report it.",
    )
    earlier_offsets_behind = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The same at the oldest of those batches: lag growing between the two is falling behind.",
    )
    status_figures_at = models.DateTimeField(null=True, blank=True, editable=False)
    state_rows = models.BigIntegerField(
        null=True, blank=True, editable=False, help_text="Rows of every counted state partition."
    )
    state_bytes = models.BigIntegerField(
        null=True, blank=True, editable=False, help_text="Bytes of every state file, at the last full pass."
    )
    state_providers = models.CharField(
        max_length=50,
        blank=True,
        editable=False,
        help_text="State store providers of the partitions, comma-separated (hdfs, rocksdb).",
    )

    # The sync lock: a worker owns the checkpoint until sync_lease_until; a crashed worker's lease expires.
    sync_lease_owner = models.CharField(max_length=200, blank=True, editable=False)
    sync_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # False while the timeline's roll-ups of batches stored before they existed (or while none
    # could be kept) are to be built by workers.rollup_builds, under the sync lease.
    timeline_rollups_built = models.BooleanField(default=True, editable=False)
    timeline_rollups_through = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="While the timeline's roll-ups are built in chunks: the last batch id they cover so far.",
    )

    objects = CheckpointQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("dashboards:checkpoint-detail", args=[self.pk])

    @property
    def sync_overdue(self) -> bool:
        """Tell whether the last sync is older than SYNC_OVERDUE_INTERVALS intervals: the figures
        shown may be stale (workers, beat or the broker down, or storage failing)."""
        if not self.is_enabled or self.is_archived or self.last_synced_at is None:
            return False
        allowed = timedelta(seconds=self.sync_interval_seconds * SYNC_OVERDUE_INTERVALS + SYNC_OVERDUE_GRACE_SECONDS)
        return timezone.now() - self.last_synced_at > allowed

    def status_facts(self) -> StatusFacts:
        """The health model's input; the row must come from CheckpointQuerySet.with_status_facts."""
        return status_facts_of({name: getattr(self, name) for name in STATUS_FACT_FIELDS})

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    def save(self, *args, **kwargs) -> None:
        """Save, then keep the periodic sync in celery beat's table in step with this row."""
        super().save(*args, **kwargs)
        scheduled = {"sync_interval_seconds", "is_enabled", "name", "archived_at"}
        if kwargs.get("update_fields") is None or scheduled & set(kwargs["update_fields"]):
            task = schedule_sync(self)
            if self.sync_schedule_id != task.pk:
                self.sync_schedule = task
                super().save(update_fields=["sync_schedule"])

    def delete(self, *args, **kwargs):
        unschedule_sync(self)
        return super().delete(*args, **kwargs)


class BatchQuerySet(models.QuerySet):
    def for_table(self) -> BatchQuerySet:
        """Newest first, with the columns the batch table shows (not the pinned conf)."""
        return self.order_by("-batch_id").only(
            "checkpoint_id", "batch_id", "timestamp_ms", "watermark_ms", "is_committed", "sources"
        )

    def uncommitted(self) -> BatchQuerySet:
        return self.filter(is_committed=False)

    def untimed(self) -> BatchQuerySet:
        """Batches without a start time (Spark 2.0 wrote 0 as batchTimestampMs): off any time axis."""
        return self.filter(timestamp_ms__lte=0)

    def latest_conf(self) -> dict[str, str]:
        """The SQL conf the newest batch pinned in the offset log ({} without batches)."""
        return self.order_by("-batch_id").values_list("conf", flat=True).first() or {}

    def recent_timestamps(self, count: int) -> list[int]:
        """batchTimestampMs of the newest ``count`` batches (for the trigger interval)."""
        return list(self.order_by("-batch_id").values_list("timestamp_ms", flat=True)[:count])

    def insert_rows(self, rows: Iterable[dict[str, Any]], *, batch_size: int = 1000) -> int:
        """Insert new batches given as column values ({attname: value}); return how many.

        bulk_create builds a model instance and prepares every field of every row, which was a
        third of a first sync (bench/first_sync.py). Here one INSERT goes to executemany, plain
        columns pass as they are, the JSON ones are adapted by their field, and a conf equal to
        the previous row's (the usual case: Spark pins the same conf in every batch) is adapted once.
        """
        connection = connections[self.db]
        fields = [field for field in self.model._meta.concrete_fields if not field.primary_key]
        defaults = {field.attname: field.get_db_prep_save(field.get_default(), connection) for field in fields}
        adapt = _JsonAdapter(fields, connection)
        table = connection.ops.quote_name(self.model._meta.db_table)
        columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
        sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
        names = [field.attname for field in fields]
        inserted, pending = 0, []
        with connection.cursor() as cursor:
            for row in rows:
                pending.append([adapt(name, row[name]) if name in row else defaults[name] for name in names])
                if len(pending) == batch_size:
                    cursor.executemany(sql, pending)
                    inserted, pending = inserted + len(pending), []
            if pending:
                cursor.executemany(sql, pending)
        return inserted + len(pending)


class _JsonAdapter:
    """Adapt a row's values for executemany: JSON columns through their field, the rest as they are."""

    def __init__(self, fields: list[models.Field], connection) -> None:
        self.json_fields = {field.attname: field for field in fields if isinstance(field, models.JSONField)}
        self.connection = connection
        self.previous: dict[str, tuple[Any, Any]] = {}

    def __call__(self, name: str, value: Any) -> Any:
        field = self.json_fields.get(name)
        if field is None or value is None:
            return value
        last = self.previous.get(name)
        if last is not None and last[0] == value:
            return last[1]
        prepared = field.get_db_prep_save(value, self.connection)
        self.previous[name] = (value, prepared)
        return prepared


class Batch(models.Model):
    """One micro-batch: its offsets/N entry and, once written, its commits/N entry."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="batches")
    batch_id = models.BigIntegerField()
    offset_log_version = models.PositiveSmallIntegerField()
    timestamp_ms = models.BigIntegerField(help_text="batchTimestampMs from the offset log (0 when Spark wrote none).")
    watermark_ms = models.BigIntegerField(help_text="batchWatermarkMs from the offset log.")
    conf = models.JSONField(default=dict, blank=True, help_text="The SQL conf Spark pinned in the offset log.")
    sources = models.JSONField(
        default=list, help_text="One offset per source as written (a JSON string), null for '-'."
    )
    source_ids = models.JSONField(null=True, blank=True, help_text="Source ids of an offset log v2 entry.")
    is_committed = models.BooleanField(default=False)
    commit_log_version = models.PositiveSmallIntegerField(null=True, blank=True)
    next_batch_watermark_ms = models.BigIntegerField(null=True, blank=True)
    commit_metadata = models.JSONField(
        null=True, blank=True, help_text="stateUniqueIds / sinkMetadataMap of newer commit logs."
    )
    synced_at = models.DateTimeField(default=timezone.now)

    objects = BatchQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["checkpoint", "batch_id"], name="unique_batch_per_checkpoint")]
        indexes = [models.Index(fields=["checkpoint", "is_committed"], name="batch_commit_state")]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return f"{self.checkpoint} batch {self.batch_id}"

    @property
    def timestamp(self) -> datetime | None:
        return ms_to_datetime(self.timestamp_ms)

    @property
    def watermark(self) -> datetime | None:
        return ms_to_datetime(self.watermark_ms)


class SyncRunQuerySet(models.QuerySet):
    def finished_before(self, moment: datetime) -> SyncRunQuerySet:
        """Finished syncs that started before ``moment`` (what retention may fold and delete)."""
        return self.filter(started_at__lt=moment).exclude(status=SyncRun.Status.RUNNING)

    def totals_by_checkpoint_and_status(self) -> SyncRunQuerySet:
        """One row per (checkpoint, status): runs, storage calls by kind and bytes read."""
        return (
            self.order_by()
            .values("checkpoint_id", "status")
            .annotate(runs=models.Count("pk"), **{field: models.Sum(field) for field in SyncTotal.SUMMED_FIELDS})
        )

    def read_to_the_end_since(self, since: datetime) -> SyncRunQuerySet:
        """Syncs started at ``since`` or later that read the logs to the end (file errors leave
        the rest read), oldest first."""
        return self.filter(started_at__gte=since, status__in=(SyncRun.Status.OK, SyncRun.Status.PARTIAL)).order_by(
            "started_at"
        )


class SyncRun(models.Model):
    """One sync of one checkpoint: what it read, how many storage calls it made, how it ended."""

    class Status(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        PARTIAL = "partial", "ok with file errors"
        FAILED = "failed"

    class Kind(models.TextChoices):
        PROBE = "probe", "probe of the next names"
        RECONCILE = "reconcile", "full listing"

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="sync_runs")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.RECONCILE)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    worker = models.CharField(max_length=200, blank=True)
    files_read = models.PositiveIntegerField(default=0)
    bytes_read = models.PositiveBigIntegerField(default=0)
    list_calls = models.PositiveIntegerField(default=0)
    info_calls = models.PositiveIntegerField(default=0)
    read_calls = models.PositiveIntegerField(default=0)
    new_batches = models.PositiveIntegerField(default=0)
    new_commits = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)

    objects = SyncRunQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["checkpoint", "-started_at"], name="sync_run_recent")]

    def __str__(self) -> str:
        return f"sync of {self.checkpoint} at {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def duration(self) -> timedelta | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


class SyncTotal(models.Model):
    """What the syncs of one checkpoint that ended with one status did, once their rows were pruned.

    workers/retention.py folds sync runs older than CKPTWEB_SYNC_HISTORY_DAYS into these rows
    before deleting them; the /metrics counters are these plus the runs still kept, so pruning
    never makes a counter drop.
    """

    SUMMED_FIELDS = ("list_calls", "info_calls", "read_calls", "bytes_read")

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="sync_totals")
    status = models.CharField(max_length=10, choices=SyncRun.Status.choices)
    runs = models.PositiveBigIntegerField(default=0)
    list_calls = models.PositiveBigIntegerField(default=0)
    info_calls = models.PositiveBigIntegerField(default=0)
    read_calls = models.PositiveBigIntegerField(default=0)
    bytes_read = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["checkpoint", "status"], name="one_sync_total_per_status")]

    def __str__(self) -> str:
        return f"{self.runs} pruned {self.status} syncs of {self.checkpoint}"


class SyncIssueQuerySet(models.QuerySet):
    def open(self) -> SyncIssueQuerySet:
        return self.filter(resolved_at__isnull=True).order_by("path")


class SyncIssue(models.Model):
    """A file the worker could not read: shown in the UI until a later sync reads it fine."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="issues")
    path = models.CharField(max_length=1000, help_text="Path relative to the checkpoint root ('' for the root itself).")
    error_type = models.CharField(max_length=100)
    reason = models.TextField()
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = SyncIssueQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["checkpoint", "path"], name="one_issue_per_file")]

    def __str__(self) -> str:
        return f"{self.checkpoint}: {self.reason}"
