"""Batches: one row per batch id of a checkpoint's offset log, written by the sync worker only
(rows outlive Spark's purge of the log files).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connections, models
from django.utils import timezone

from dashboards.models.core import Checkpoint, ms_to_datetime


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
