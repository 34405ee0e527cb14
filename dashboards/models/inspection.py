"""What the full inspection pass finds: compactible logs, the file inventory, integrity findings.

Only workers.inspection writes these rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.utils import timezone

from dashboards.models.core import Checkpoint
from dashboards.models.severity import SEVERITY_ERROR, SEVERITY_INFO, SEVERITY_WARNING
from workers.checkpoint.compactible import next_compaction_batch_id
from workers.checkpoint.integrity.findings import Finding as IntegrityFinding
from workers.checkpoint.maintenance.repair import is_repairable
from workers.checkpoint.statecolumns import column_values, has_positional_names


class MetadataLog(models.Model):
    """A compactible log (a file source's sources/<i>, a file sink's _spark_metadata) as last read."""

    class Kind(models.TextChoices):
        SOURCE = "source", "file source"
        SINK = "sink", "file sink"

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="metadata_logs")
    path = models.CharField(max_length=1000, help_text="sources/<i> relative to the checkpoint, or the sink log's URL.")
    kind = models.CharField(max_length=6, choices=Kind.choices)
    compact_interval = models.PositiveIntegerField()
    latest_batch_id = models.BigIntegerField(null=True, blank=True)
    live_entries = models.PositiveBigIntegerField(default=0)
    latest_compact_bytes = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)
    read_at_batch_id = models.BigIntegerField(
        null=True, blank=True, help_text="Newest batch of the query (offsets/N) when the full pass read the log."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["checkpoint", "path"], name="one_row_per_metadata_log")]
        ordering = ["kind", "path"]

    def __str__(self) -> str:
        return f"{self.checkpoint}: {self.path}"

    @property
    def next_compaction_batch_id(self) -> int | None:
        """CompactibleFileStreamLog.nextCompactionBatchId after the latest batch."""
        if self.latest_batch_id is None:
            return None
        return next_compaction_batch_id(self.latest_batch_id, self.compact_interval)


class CompactFile(models.Model):
    """A `.compact` file seen on storage; kept after Spark deletes it, so growth stays visible."""

    log = models.ForeignKey(MetadataLog, on_delete=models.CASCADE, related_name="compact_files")
    batch_id = models.BigIntegerField()
    size_bytes = models.PositiveBigIntegerField()
    first_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["log", "batch_id"], name="one_row_per_compact_file")]
        ordering = ["batch_id"]


class DirectoryInventoryQuerySet(models.QuerySet):
    def latest_for(self, checkpoint: Checkpoint) -> DirectoryInventoryQuerySet:
        """The rows of the checkpoint's most recent inventory pass (one query: the pass's time is a subquery)."""
        passes = self.filter(checkpoint=checkpoint).order_by("-taken_at").values("taken_at")[:1]
        return self.filter(checkpoint=checkpoint, taken_at=models.Subquery(passes)).order_by("path")

    def pass_times_before(self, checkpoint_id: int, moment: datetime) -> list[datetime]:
        """When each of the checkpoint's inventory passes older than ``moment`` was taken, oldest first."""
        passes = self.filter(checkpoint_id=checkpoint_id, taken_at__lt=moment).order_by("taken_at")
        return list(passes.values_list("taken_at", flat=True).distinct())

    def growth_for(self, checkpoint: Checkpoint) -> DirectoryInventoryQuerySet:
        """Every pass's (time, kind, bytes, files) for the growth chart, oldest first."""
        return self.filter(checkpoint=checkpoint).order_by("taken_at", "path")


class DirectoryInventory(models.Model):
    """Files and bytes of one directory of a checkpoint at one inventory pass."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="inventory")
    taken_at = models.DateTimeField()
    taken_at_batch_id = models.BigIntegerField(
        null=True, blank=True, help_text="Newest batch of the query (offsets/N) when the pass was taken."
    )
    path = models.CharField(max_length=1000)
    kind = models.CharField(max_length=20)
    files = models.PositiveIntegerField()
    size_bytes = models.PositiveBigIntegerField()
    small_files = models.PositiveIntegerField()
    oldest_batch_id = models.BigIntegerField(null=True, blank=True)
    newest_batch_id = models.BigIntegerField(null=True, blank=True)
    list_requests = models.PositiveIntegerField(
        help_text="Estimated LIST requests of one full read on an object store."
    )
    get_requests = models.PositiveIntegerField(help_text="Estimated GET requests of one full read on an object store.")

    objects = DirectoryInventoryQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["checkpoint", "taken_at"], name="inventory_by_pass")]
        verbose_name_plural = "directory inventories"


class FindingQuerySet(models.QuerySet):
    def open(self) -> FindingQuerySet:
        return self.filter(resolved_at__isnull=True).order_by("-severity", "path", "code")


class Finding(models.Model):
    """An integrity check's finding: what is wrong with which file, and what it means for a restart."""

    class Severity(models.IntegerChoices):
        INFO = SEVERITY_INFO, "info"
        WARNING = SEVERITY_WARNING, "warning"
        ERROR = SEVERITY_ERROR, "error"

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="findings")
    code = models.CharField(max_length=50)
    severity = models.PositiveSmallIntegerField(choices=Severity.choices)
    path = models.CharField(max_length=1000, blank=True)
    message = models.TextField()
    restart_impact = models.TextField(blank=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = FindingQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "code", "path"], name="one_finding_per_code_and_file")
        ]

    def __str__(self) -> str:
        return f"{self.checkpoint}: {self.get_severity_display()} {self.code} {self.path}"

    @property
    def is_repairable(self) -> bool:
        """Whether a repair plan addresses this finding (the library's judgement): its row links to that plan."""
        found = IntegrityFinding(self.get_severity_display(), self.code, self.path, self.message, self.restart_impact)
        return is_repairable(found)


class StatePartitionQuerySet(models.QuerySet):
    def for_panel(self) -> StatePartitionQuerySet:
        return self.order_by("operator", "store", "partition")


class StatePartition(models.Model):
    """One state store directory (operator, partition, store) as the last full pass found it."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="state_partitions")
    operator = models.PositiveIntegerField()
    partition = models.PositiveIntegerField()
    store = models.CharField(max_length=200)
    provider = models.CharField(max_length=10)
    path = models.CharField(max_length=1000)
    latest_version = models.BigIntegerField(null=True, blank=True)
    earliest_version = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Oldest version with a file on storage (Spark's maintenance deletes older ones).",
    )
    maintenance_probed_version = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="latest_version when storage was last looked at for snapshots maintenance writes (walk or probe).",
    )
    snapshot_version = models.BigIntegerField(
        null=True, blank=True, help_text="Last N.snapshot (HDFS) or N.zip (RocksDB)."
    )
    delta_chain = models.PositiveIntegerField(
        null=True, blank=True, help_text="Deltas or changelogs replayed after it."
    )
    load_files = models.PositiveIntegerField(null=True, blank=True)
    load_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    bytes_on_disk = models.PositiveBigIntegerField(default=0)
    rows = models.BigIntegerField(null=True, blank=True)
    rows_version = models.BigIntegerField(null=True, blank=True)
    uncommitted_versions = models.JSONField(
        default=list,
        blank=True,
        help_text="Versions past the committed one: files of a batch with no commit, which a restart rewrites.",
    )
    note = models.TextField(blank=True, help_text="Why rows are unknown, or what could not be read.")
    variables = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            "A store with column families (transformWithState): per state variable, at rows_version, "
            "{name, kind, internal, rows, values, bytes}."
        ),
    )
    updated_at = models.DateTimeField(default=timezone.now)

    objects = StatePartitionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "operator", "partition", "store"], name="one_row_per_state_store_dir"
            )
        ]

    def __str__(self) -> str:
        return f"{self.checkpoint}: {self.path}"

    @property
    def rows_batch_id(self) -> int | None:
        """The batch whose commit wrote the version the rows are of (batch N commits version N + 1)."""
        return None if self.rows_version is None else self.rows_version - 1

    @property
    def snapshot_age(self) -> int | None:
        """Versions written since the last snapshot (what the next restart replays)."""
        if self.latest_version is None or self.snapshot_version is None:
            return self.delta_chain
        return self.latest_version - self.snapshot_version


class StateScanQuerySet(models.QuerySet):
    def latest_for(self, checkpoint: Checkpoint) -> StateScan | None:
        return self.filter(checkpoint=checkpoint).order_by("-started_at", "-pk").first()


class StateScan(models.Model):
    """The state rows of a checkpoint with many partitions, counted by several workers in chunks.

    A full pass that finds more store directories than CKPTWEB_STATE_FANOUT_PARTITIONS stores
    their files' figures itself and leaves the row counts to one task per chunk of partitions;
    the chunk that completes the set marks the scan finished (the join). Storage calls of every
    chunk are added here.
    """

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="state_scans")
    version = models.BigIntegerField(null=True, blank=True, help_text="State version the rows are counted at.")
    partitions = models.PositiveIntegerField()
    chunks = models.PositiveIntegerField()
    chunks_done = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    list_calls = models.PositiveIntegerField(default=0)
    info_calls = models.PositiveIntegerField(default=0)
    read_calls = models.PositiveIntegerField(default=0)
    bytes_read = models.PositiveBigIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)

    objects = StateScanQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["checkpoint", "-started_at"], name="state_scan_recent")]

    def __str__(self) -> str:
        return f"state scan of {self.checkpoint} at {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def duration(self) -> timedelta | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


class StateScanChunk(models.Model):
    """One worker's share of a state scan; done once, even if its task is delivered twice."""

    scan = models.ForeignKey(StateScan, on_delete=models.CASCADE, related_name="chunk_rows")
    index = models.PositiveIntegerField()
    partitions = models.JSONField(help_text="[[operator, partition], ...] this chunk counts.")
    done_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="The worker that counted it.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scan", "index"], name="one_row_per_state_scan_chunk")]


@dataclass(frozen=True, slots=True)
class SampleTable:
    """Decoded state rows as the partition page shows them: key cells, then value cells."""

    key_columns: list[str]
    value_columns: list[str]
    rows: list[tuple[list[Any], list[Any]]]
    has_positional_key_names: bool


def _names_in(rows: list[dict], part: str) -> list[str]:
    """Column names of a sample decoded before columns were stored: its first row's fields."""
    return list(rows[0][part]) if rows and isinstance(rows[0][part], dict) else []


class StateSample(models.Model):
    """Decoded rows of one partition at one version, fetched on request by a worker."""

    partition = models.ForeignKey(StatePartition, on_delete=models.CASCADE, related_name="samples")
    version = models.BigIntegerField()
    requested_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    key_schema = models.TextField(blank=True)
    value_schema = models.TextField(blank=True)
    rows = models.JSONField(default=list, blank=True, help_text="[{key: {...}, value: {...}}] as decoded.")
    columns = models.JSONField(
        default=dict, blank=True, help_text='{"key": [...], "value": [...]}: the schemas\' fields, nested ones dotted.'
    )
    files = models.JSONField(default=list, blank=True, help_text="[[name, bytes], ...] of the partition's directory.")
    error = models.TextField(blank=True)
    note = models.TextField(blank=True, help_text="Why the rows are of another version than requested.")

    class Meta:
        ordering = ["-requested_at"]

    def table(self) -> SampleTable:
        """The rows as a table: one column per field of the key and value schemas."""
        rows = self.rows or []
        key_columns = self.columns.get("key") or _names_in(rows, "key")
        value_columns = self.columns.get("value") or _names_in(rows, "value")
        cells = [(column_values(row["key"], key_columns), column_values(row["value"], value_columns)) for row in rows]
        return SampleTable(key_columns, value_columns, cells, has_positional_names(key_columns))
