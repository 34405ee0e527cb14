"""The syncs that read a checkpoint: each run, the running totals per checkpoint, and the issues a
sync met (a file it could not read). Written by the sync worker only.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone


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

    checkpoint = models.ForeignKey("Checkpoint", on_delete=models.CASCADE, related_name="sync_runs")
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

    checkpoint = models.ForeignKey("Checkpoint", on_delete=models.CASCADE, related_name="sync_totals")
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

    checkpoint = models.ForeignKey("Checkpoint", on_delete=models.CASCADE, related_name="issues")
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
