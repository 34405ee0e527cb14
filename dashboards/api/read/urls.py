"""URLs of the read API, mounted under ``api/v1/``. Names start with "api-": token endpoints."""

from django.urls import path

from dashboards.api.read import index, views

# The index lists these; it gets them here rather than importing this module (which imports it).
resources = [
    path("checkpoints/", views.CheckpointList.as_view(), name="api-checkpoint-list"),
    path("checkpoints/<int:checkpoint_id>/", views.CheckpointDetail.as_view(), name="api-checkpoint-detail"),
    path("checkpoints/<int:checkpoint_id>/batches/", views.BatchList.as_view(), name="api-batch-list"),
    path("checkpoints/<int:checkpoint_id>/progress/", views.ProgressList.as_view(), name="api-progress-list"),
    path(
        "checkpoints/<int:checkpoint_id>/state-partitions/",
        views.StatePartitionList.as_view(),
        name="api-state-partition-list",
    ),
    path(
        "checkpoints/<int:checkpoint_id>/metadata-logs/", views.MetadataLogList.as_view(), name="api-metadata-log-list"
    ),
    path("checkpoints/<int:checkpoint_id>/findings/", views.OpenFindingList.as_view(), name="api-finding-list"),
    path(
        "checkpoints/<int:checkpoint_id>/maintenance-runs/",
        views.MaintenanceRunList.as_view(),
        name="api-maintenance-run-list",
    ),
]
urlpatterns = [path("", index.ApiIndex.as_view(resources=resources), name="api-index"), *resources]
