from django.contrib import admin

from dashboards.models import (
    AuditEntry,
    Batch,
    BatchProgress,
    Checkpoint,
    EventLogDirectory,
    MaintenancePolicy,
    MaintenanceRun,
    QueryRun,
    StreamingQuery,
    SyncIssue,
    SyncRun,
)
from dashboards.registry.forms import CheckpointForm
from dashboards.registry.registrations import audit_refusal, remove_checkpoint, save_registration


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    """The same form (paths checked) and the same audit entries as the pages and the command line."""

    form = CheckpointForm
    list_display = [
        "name",
        "url",
        "is_enabled",
        "archived_at",
        "latest_batch_id",
        "uncommitted_batch_count",
        "last_synced_at",
    ]
    list_filter = ["is_enabled", ("archived_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "url"]
    readonly_fields = [
        "query",
        "latest_batch_id",
        "latest_batch_at",
        "latest_committed_batch_id",
        "uncommitted_batch_count",
        "last_synced_at",
        "sync_lease_owner",
        "sync_lease_until",
        "archived_at",
    ]

    def save_model(self, request, obj, form, change) -> None:
        save_registration(form, actor=request.user)

    def render_change_form(self, request, context, *args, **kwargs):
        # The admin has no hook for an invalid form; this is the page it renders to show the errors.
        form = context["adminform"].form
        if request.method == "POST" and form.errors:
            audit_refusal(form, actor=request.user)
        return super().render_change_form(request, context, *args, **kwargs)

    def delete_model(self, request, obj) -> None:
        remove_checkpoint(obj, actor=request.user, reason="removed in the admin")

    def delete_queryset(self, request, queryset) -> None:
        for checkpoint in queryset:
            self.delete_model(request, checkpoint)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the sync worker writes: browsable in the admin, never edited there."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    list_display = ["checkpoint", "batch_id", "timestamp_ms", "watermark_ms", "is_committed"]
    list_filter = ["is_committed", "checkpoint"]
    list_select_related = ["checkpoint"]


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyAdmin):
    list_display = [
        "checkpoint",
        "started_at",
        "status",
        "new_batches",
        "new_commits",
        "read_calls",
        "list_calls",
        "error_count",
    ]
    list_filter = ["status", "checkpoint"]
    list_select_related = ["checkpoint"]


@admin.register(SyncIssue)
class SyncIssueAdmin(ReadOnlyAdmin):
    list_display = ["checkpoint", "path", "error_type", "first_seen_at", "last_seen_at", "resolved_at"]
    list_filter = ["error_type", "checkpoint"]


@admin.register(StreamingQuery)
class StreamingQueryAdmin(admin.ModelAdmin):
    list_display = ["query_id", "name", "first_seen_at"]
    search_fields = ["query_id", "name"]


@admin.register(QueryRun)
class QueryRunAdmin(ReadOnlyAdmin):
    list_display = ["run_id", "query", "started_at", "ended_at"]


@admin.register(EventLogDirectory)
class EventLogDirectoryAdmin(admin.ModelAdmin):
    """Registering an event-log directory is an operator's job; the workers fill in the rest."""

    list_display = ["name", "url", "is_enabled", "last_tailed_at", "progress_events_read"]
    readonly_fields = ["positions", "errors", "last_tailed_at", "progress_events_read"]

    def save_model(self, request, obj, form, change) -> None:
        from django.conf import settings

        from workers.checkpoint.storage.locations import check_allowed

        obj.url = check_allowed(obj.url, settings.CHECKPOINT_ROOTS)
        super().save_model(request, obj, form, change)


@admin.register(BatchProgress)
class BatchProgressAdmin(ReadOnlyAdmin):
    list_display = ["query", "batch_id", "timestamp", "num_input_rows", "origin"]
    list_filter = ["origin"]


@admin.register(MaintenanceRun)
class MaintenanceRunAdmin(ReadOnlyAdmin):
    """Runs change only through the maintenance pages, which audit every step."""

    list_display = [
        "pk",
        "checkpoint",
        "action",
        "status",
        "requested_by",
        "confirmed_by",
        "requested_at",
        "finished_at",
    ]
    list_filter = ["action", "status"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit trail: never added, changed or deleted by hand."""

    list_display = ["at", "actor_name", "event", "checkpoint_name", "run", "detail"]
    list_filter = ["event"]
    search_fields = ["actor_name", "checkpoint_name", "detail"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(MaintenancePolicy)
class MaintenancePolicyAdmin(admin.ModelAdmin):
    list_display = ["checkpoint", "action", "parameters", "interval_seconds", "is_enabled", "created_by"]
    readonly_fields = ["created_by", "created_at"]

    def has_add_permission(self, request) -> bool:
        return request.user.has_perm("dashboards.run_maintenance") and super().has_add_permission(request)

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
        AuditEntry.record(
            AuditEntry.Event.POLICY_CHANGED,
            actor=request.user,
            checkpoint=obj.checkpoint,
            detail=f"{'changed' if change else 'created'} {obj}: {obj.reason}",
            data={"parameters": obj.parameters},
        )
