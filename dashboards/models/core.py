"""Checkpoints: what a user registered, the figures each sync stores on it, and the QuerySet methods
the list, the query page, the API and `/metrics` read them by (which progress is a checkpoint's
own, its status facts). Its batches are in batches.py, its syncs in syncs.py, its query and runs
in queries.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import BigIntegerField, Case, F, OuterRef, Q, Subquery, When
from django.urls import reverse
from django.utils import timezone

from dashboards.health.query_status import StatusFacts
from dashboards.maintenance_page.figures import LogFigures, MaintenanceFigures, StoreFigures
from dashboards.models.queries import QueryRun, StreamingQuery
from dashboards.models.severity import SEVERITY_ERROR, SEVERITY_WARNING
from dashboards.models.status_facts import LIST_FIELDS, STATUS_FACT_FIELDS, count_per_checkpoint, status_facts_of
from dashboards.models.syncs import SyncIssue, SyncRun
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
        """What the maintenance form's defaults and previews are computed from (five small queries).

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
