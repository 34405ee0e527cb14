"""Rows as the read API shows them: the stored figures, no storage paths beyond the checkpoint's."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from dashboards.api.read.signature import checkpoint_signature
from dashboards.models import (
    Batch,
    BatchProgress,
    Checkpoint,
    Finding,
    MaintenanceRun,
    MetadataLog,
    StatePartition,
)


class CheckpointSerializer(serializers.ModelSerializer):
    query_id = serializers.UUIDField(source="query.query_id", allow_null=True, read_only=True, default=None)
    signature = serializers.SerializerMethodField()

    class Meta:
        model = Checkpoint
        fields = [
            "id",
            "name",
            "url",
            "is_enabled",
            "query_id",
            "latest_batch_id",
            "latest_batch_at",
            "latest_committed_batch_id",
            "earliest_stored_batch_id",
            "uncommitted_batch_count",
            "last_synced_at",
            "last_reconciled_at",
            "signature",
        ]

    def get_signature(self, checkpoint: Checkpoint) -> str:
        return checkpoint_signature(checkpoint)


class BatchSerializer(serializers.ModelSerializer):
    class Meta:
        model = Batch
        fields = [
            "batch_id",
            "offset_log_version",
            "timestamp_ms",
            "watermark_ms",
            "sources",
            "source_ids",
            "is_committed",
            "commit_log_version",
            "next_batch_watermark_ms",
            "synced_at",
        ]


class BatchProgressSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField(source="run.run_id", allow_null=True, read_only=True, default=None)

    class Meta:
        model = BatchProgress
        fields = [
            "batch_id",
            "run_id",
            "timestamp",
            "batch_duration_ms",
            "duration_ms",
            "num_input_rows",
            "input_rows_per_second",
            "processed_rows_per_second",
            "watermark",
            "event_time",
            "sources",
            "sink",
            "origin",
            "received_at",
        ]


class StatePartitionSerializer(serializers.ModelSerializer):
    class Meta:
        model = StatePartition
        fields = [
            "id",
            "operator",
            "partition",
            "store",
            "provider",
            "path",
            "latest_version",
            "earliest_version",
            "snapshot_version",
            "delta_chain",
            "load_files",
            "load_bytes",
            "bytes_on_disk",
            "rows",
            "rows_version",
            "note",
            "updated_at",
        ]


class MetadataLogSerializer(serializers.ModelSerializer):
    next_compaction_batch_id = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = MetadataLog
        fields = [
            "id",
            "path",
            "kind",
            "compact_interval",
            "latest_batch_id",
            "next_compaction_batch_id",
            "live_entries",
            "latest_compact_bytes",
            "updated_at",
        ]


class FindingSerializer(serializers.ModelSerializer):
    severity = serializers.CharField(source="get_severity_display", read_only=True)

    class Meta:
        model = Finding
        fields = ["id", "code", "severity", "path", "message", "restart_impact", "first_seen_at", "last_seen_at"]


class PlanSummarySerializer(serializers.Serializer):
    summary = serializers.CharField()
    writes = serializers.IntegerField(help_text="Files the plan writes.")
    deletes = serializers.IntegerField(help_text="Files the plan deletes.")
    bytes_freed = serializers.IntegerField(allow_null=True)
    bytes_written = serializers.IntegerField(allow_null=True)


class MaintenanceRunSerializer(serializers.ModelSerializer):
    """A run and the size of its plan; the plan's file lists stay on the confirmation page."""

    plan_summary = serializers.SerializerMethodField()

    class Meta:
        model = MaintenanceRun
        fields = [
            "id",
            "action",
            "status",
            "requested_at",
            "planned_at",
            "plan_summary",
            "confirmed_at",
            "queued_at",
            "started_at",
            "finished_at",
            "steps_done",
            "steps_total",
            "error",
            "plan_error",
        ]

    @extend_schema_field(PlanSummarySerializer(allow_null=True))
    def get_plan_summary(self, run: MaintenanceRun) -> dict | None:
        if run.plan is None:
            return None
        plan = run.plan
        return {
            "summary": plan.get("summary", ""),
            "writes": len(plan.get("writes", ())),
            "deletes": len(plan.get("deletes", ())),
            "bytes_freed": plan.get("bytes_freed"),
            "bytes_written": plan.get("bytes_written"),
        }
