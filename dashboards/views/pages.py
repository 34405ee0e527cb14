"""Pages and panels: fetch through a permission helper, gather, render. No format or query logic."""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboards.health.query_status import Thresholds
from dashboards.list_page.checkpoint_list import PROVIDERS, ListRequest, build_list
from dashboards.list_page.state_variables import page_state_variables
from dashboards.list_page.trends import duration_trends
from dashboards.models import (
    Batch,
    BatchProgress,
    Checkpoint,
    DirectoryInventory,
    MetadataLog,
    StatePartition,
    StateSample,
)
from dashboards.models.status_rows import (
    PROGRESS_OWNER_OF_ONE,
    STATUS_FACTS_OF_ONE,
    annotated_checkpoint,
    status_list_rows,
)
from dashboards.query_page.as_of import (
    AsOf,
    Read,
    sync_as_of,
)
from dashboards.query_page.chart_series import BatchRange, timeline_version
from dashboards.query_page.charts import (
    InventoryPoint,
    PartitionPoint,
    batch_timeline_figure,
    compact_size_figure,
    inventory_growth_figure,
    state_heatmap_figure,
)
from dashboards.query_page.fragments import cached_text
from dashboards.query_page.log_outlooks import compact_sizes, outlook, trigger_seconds
from dashboards.query_page.run_summary import compare_with_run
from dashboards.query_page.runtime_charts import figure_json
from dashboards.query_page.state_panel import state_rows_version
from dashboards.query_page.summary_builds import still_building, timeline_batches_to_summarise
from dashboards.query_page.timeline_rollups import timeline_series
from dashboards.queueing import ASK_AGAIN, PERIODIC_SYNC, enqueue_on_commit
from dashboards.task_names import SAMPLE_STATE_PARTITION, SYNC_CHECKPOINT

CHECKPOINTS_PER_PAGE = 50


def get_checkpoint_for_user(request: HttpRequest, checkpoint_id: int, *, with_status_facts: bool = False) -> Checkpoint:
    """Every signed-in user may view every checkpoint; per-team visibility would go here.

    The checkpoint comes with which progress is its own (CheckpointQuerySet.with_progress_owner),
    and with the health model's figures when asked.
    """
    annotations = STATUS_FACTS_OF_ONE if with_status_facts else PROGRESS_OWNER_OF_ONE
    checkpoint = annotated_checkpoint(checkpoint_id, annotations)
    if checkpoint is None:
        raise Http404(f"No checkpoint {checkpoint_id}")
    return checkpoint


@login_required
def checkpoint_list(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboards/checkpoint_list.html", _checkpoint_page_context(request))


@login_required
def checkpoint_list_panel(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboards/partials/checkpoint_table.html", _checkpoint_page_context(request))


def _checkpoint_page_context(request: HttpRequest) -> dict:
    list_request = ListRequest.from_query(request.GET)
    now = timezone.now()
    result = build_list(status_list_rows(), list_request, now=now, thresholds=Thresholds.from_settings(settings))
    # get_page turns a garbage ?page= into the first page and one past the end into the last.
    page = Paginator(result.rows, CHECKPOINTS_PER_PAGE).get_page(request.GET.get("page"))
    return {
        "rows": page.object_list,
        "trends": duration_trends([row.checkpoint for row in page.object_list], now=now),
        "state_variables": page_state_variables(row.checkpoint["id"] for row in page.object_list),
        "page_obj": page,
        "result": result,
        "list_request": list_request,
        "providers": PROVIDERS,
    }


@login_required
def batch_timeline_chart(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    building = timeline_batches_to_summarise(checkpoint)
    if building is not None:
        return still_building(building)
    batch_range = BatchRange.from_query(request.GET)
    interval = (
        checkpoint.metadata_logs.filter(kind=MetadataLog.Kind.SINK).values_list("compact_interval", flat=True).first()
    )
    build = partial(_timeline_json, checkpoint, batch_range, interval)
    body = cached_text("timeline-chart", (*timeline_version(checkpoint), batch_range.as_query(), interval), build)
    return HttpResponse(body, content_type="application/json")


def _timeline_json(checkpoint: Checkpoint, batch_range: BatchRange, sink_compact_interval: int | None) -> str:
    """The batch timeline figure of the range, as JSON."""
    series = timeline_series(checkpoint, batch_range)
    figure = batch_timeline_figure(
        series.points,
        sink_compact_interval=sink_compact_interval,
        bucket_width=series.bucket_width,
        has_untimed_batches=not series.points and _has_untimed_batch(checkpoint, batch_range),
    )
    return figure_json(figure)


def _batches_in(checkpoint: Checkpoint, batch_range: BatchRange):
    return checkpoint.batches.filter(**batch_range.lookups("batch_id"))


def _has_untimed_batch(checkpoint: Checkpoint, batch_range: BatchRange) -> bool:
    """Whether the range has a batch without a start time: the first one in batch id order, as
    an index range read (a bare EXISTS lets PostgreSQL, expecting most rows to match, scan the
    table from its start, past every batch before the range)."""
    untimed = _batches_in(checkpoint, batch_range).untimed().order_by("batch_id")
    return untimed.values_list("batch_id", flat=True).first() is not None


@login_required
def compact_size_chart(request: HttpRequest, checkpoint_id: int, log_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    log = get_object_or_404(MetadataLog, checkpoint=checkpoint, pk=log_id)
    sizes = compact_sizes(log)
    projection = outlook(log, sizes, trigger_seconds(checkpoint))
    figure = compact_size_figure(sizes, projection, compact_interval=log.compact_interval)
    return HttpResponse(figure_json(figure), content_type="application/json")


@login_required
def inventory_growth_chart(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    rows = DirectoryInventory.objects.growth_for(checkpoint).values_list("taken_at", "path", "size_bytes", "files")
    figure = inventory_growth_figure(InventoryPoint(*row) for row in rows)
    return HttpResponse(figure_json(figure), content_type="application/json")


@login_required
def state_heatmap_chart(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    version = state_rows_version(checkpoint)
    body = cached_text("state-heatmap", version.key, partial(_state_heatmap_json, checkpoint))
    return HttpResponse(body, content_type="application/json")


def _state_heatmap_json(checkpoint: Checkpoint) -> str:
    points = [
        PartitionPoint(f"{p.operator}/{p.store}/{p.partition}", p.rows, p.bytes_on_disk, p.delta_chain, p.snapshot_age)
        for p in checkpoint.state_partitions.for_panel().only(*HEATMAP_FIELDS)
    ]
    return figure_json(state_heatmap_figure(points))


# What the heatmap reads of each partition: not its state variables and other JSON, one per row.
# The checkpoint's id too: the related manager sets each row's checkpoint from it (a query per row
# when it is deferred).
HEATMAP_FIELDS = (
    "checkpoint",
    "operator",
    "store",
    "partition",
    "rows",
    "bytes_on_disk",
    "delta_chain",
    "latest_version",
    "snapshot_version",
)


@login_required
def state_partition_detail(request: HttpRequest, checkpoint_id: int, partition_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    partition = get_object_or_404(StatePartition, checkpoint=checkpoint, pk=partition_id)
    context = {
        "checkpoint": checkpoint,
        "partition": partition,
        "partition_as_of": _as_of_sync(checkpoint, Read(partition.updated_at, partition.rows_batch_id), 1),
        "sample": partition.samples.first(),
    }
    template = (
        "dashboards/partials/state_sample.html"
        if request.headers.get("HX-Request")
        else "dashboards/state_partition.html"
    )
    return render(request, template, context)


@login_required
@require_POST
def state_partition_sample(request: HttpRequest, checkpoint_id: int, partition_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    partition = get_object_or_404(StatePartition, checkpoint=checkpoint, pk=partition_id)
    version = partition.rows_version or partition.latest_version
    if version is None:
        messages.error(request, "This partition has no state version to decode.")
    else:
        sample = StateSample.objects.create(partition=partition, version=version)
        # No flash message: the sample block says "Decoding…" while pending and is replaced by the rows,
        # where a message would keep saying "decoding" above rows already decoded.
        enqueue_on_commit(request, SAMPLE_STATE_PARTITION, sample.pk, what="The request", afterwards=ASK_AGAIN)
    return redirect("dashboards:state-partition", checkpoint.pk, partition.pk)


@login_required
def batch_detail(request: HttpRequest, checkpoint_id: int, batch_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    batch = get_object_or_404(Batch, checkpoint=checkpoint, batch_id=batch_id)
    progress = BatchProgress.objects.for_batch(checkpoint.query_id, batch_id)
    context = {
        "checkpoint": checkpoint,
        "batch": batch,
        "conf": sorted(batch.conf.items()),
        "progress": progress,
        "against_run": None if progress is None else compare_with_run(progress),
    }
    return render(request, "dashboards/batch_detail.html", context)


@login_required
@require_POST
def checkpoint_sync(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    enqueue_on_commit(request, SYNC_CHECKPOINT, checkpoint.pk, what="The request", afterwards=PERIODIC_SYNC)
    messages.info(request, f"Sync of {checkpoint.name} queued.")
    return redirect(checkpoint)


@login_required
@require_POST
def checkpoint_full_walk(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """Ask for a full walk: the flag is in the database, so whichever worker syncs next runs it
    (a sync already running under another worker's lease leaves it for the following one)."""
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(full_walk_requested_at=timezone.now())
    enqueue_on_commit(request, SYNC_CHECKPOINT, checkpoint.pk, what="The request", afterwards=PERIODIC_SYNC)
    messages.info(request, f"Full walk of {checkpoint.name} queued: every file is listed and checked again.")
    return redirect(checkpoint)


def health(request: HttpRequest) -> JsonResponse:
    """Public liveness check for load balancers: answers without touching storage."""
    return JsonResponse({"status": "ok"})


def _as_of_sync(checkpoint: Checkpoint, read: Read | None, batches_in_flight: int = 0) -> AsOf:
    return sync_as_of(checkpoint, read, now=timezone.now(), batches_in_flight=batches_in_flight)
