from django.urls import path

from dashboards.views import chart_builds, favicon, maintenance, query_page, registry, runtime
from dashboards.views import pages as views

app_name = "dashboards"

urlpatterns = [
    path("", views.checkpoint_list, name="checkpoint-list"),
    path("favicon.ico", favicon.favicon, name="favicon"),
    path("panels/checkpoints/", views.checkpoint_list_panel, name="checkpoint-list-panel"),
    path("checkpoints/new/", registry.checkpoint_create, name="checkpoint-create"),
    path("checkpoints/archived/", registry.archived_checkpoint_list, name="archived-checkpoint-list"),
    path("checkpoints/<int:checkpoint_id>/", query_page.checkpoint_detail, name="checkpoint-detail"),
    path("checkpoints/<int:checkpoint_id>/edit/", registry.checkpoint_edit, name="checkpoint-edit"),
    path("checkpoints/<int:checkpoint_id>/archive/", registry.checkpoint_archive, name="checkpoint-archive"),
    path("checkpoints/<int:checkpoint_id>/restore/", registry.checkpoint_restore, name="checkpoint-restore"),
    path("checkpoints/<int:checkpoint_id>/remove/", registry.checkpoint_remove, name="checkpoint-remove"),
    path("checkpoints/<int:checkpoint_id>/sync/", views.checkpoint_sync, name="checkpoint-sync"),
    path("checkpoints/<int:checkpoint_id>/full-walk/", views.checkpoint_full_walk, name="checkpoint-full-walk"),
    path(
        "checkpoints/<int:checkpoint_id>/panels/health/",
        query_page.checkpoint_health_panel,
        name="checkpoint-health-panel",
    ),
    path("checkpoints/<int:checkpoint_id>/panels/batches/", query_page.batch_table_panel, name="batch-table-panel"),
    path(
        "checkpoints/<int:checkpoint_id>/charts/timeline.json", views.batch_timeline_chart, name="batch-timeline-chart"
    ),
    path(
        "checkpoints/<int:checkpoint_id>/logs/<int:log_id>/chart.json",
        views.compact_size_chart,
        name="compact-size-chart",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/charts/inventory.json",
        views.inventory_growth_chart,
        name="inventory-growth-chart",
    ),
    path("checkpoints/<int:checkpoint_id>/charts/runtime.json", runtime.runtime_charts, name="runtime-charts"),
    # While a worker builds a history's chart roll-ups, the page polls these for the charts.
    path(
        "checkpoints/<int:checkpoint_id>/charts/timeline/slot/",
        chart_builds.timeline_chart_slot,
        name="timeline-chart-slot",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/charts/runtime/slot/",
        chart_builds.runtime_charts_slot,
        name="runtime-charts-slot",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/charts/state-heatmap.json",
        views.state_heatmap_chart,
        name="state-heatmap-chart",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/state/<int:partition_id>/",
        views.state_partition_detail,
        name="state-partition",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/state/<int:partition_id>/sample/",
        views.state_partition_sample,
        name="state-partition-sample",
    ),
    path("checkpoints/<int:checkpoint_id>/batches/<int:batch_id>/", views.batch_detail, name="batch-detail"),
    path("checkpoints/<int:checkpoint_id>/maintenance/", maintenance.maintenance_overview, name="maintenance"),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/request/",
        maintenance.maintenance_request,
        name="maintenance-request",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/preview/",
        maintenance.maintenance_preview_panel,
        name="maintenance-preview-panel",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/<int:run_id>/", maintenance.maintenance_run, name="maintenance-run"
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/<int:run_id>/panel/",
        maintenance.maintenance_run_panel,
        name="maintenance-run-panel",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/<int:run_id>/confirm/",
        maintenance.maintenance_confirm,
        name="maintenance-confirm",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/<int:run_id>/approve/",
        maintenance.maintenance_approve,
        name="maintenance-approve",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/<int:run_id>/cancel/",
        maintenance.maintenance_cancel,
        name="maintenance-cancel",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance/<int:run_id>/undo/",
        maintenance.maintenance_undo,
        name="maintenance-undo",
    ),
    path("audit/", maintenance.audit_log, name="audit-log"),
    path("health/", views.health, name="health"),
]
