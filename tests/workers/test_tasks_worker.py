"""A real Celery worker process, on Redis and the test database, runs the sync task, and as it
starts queues and runs the builds of chart roll-ups that older history lacks, chunk after chunk."""

from __future__ import annotations

import pytest

from dashboards.models import Batch, Checkpoint, SyncRun, TimelineRollup
from dashboards.query_page.chart_series import TIMELINE_SHAPE
from factories import make_checkpoint
from fixture_paths import SPARK_TEST_RESOURCES
from redis_keys import queue_of_this_run
from rollup_expectations import expected_rollups, stored_rollups
from worker_process import celery_worker, redis_url_or_skip, wait_for
from workers import tasks
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(checkpoint_roots):
    with celery_worker(redis_url_or_skip(), checkpoint_roots) as (queue, _):
        yield queue


def test_the_worker_syncs_a_checkpoint_sent_through_redis(worker, copy_checkpoint):
    directory = copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent")
    checkpoint = make_checkpoint(url=str(directory))

    tasks.sync_checkpoint.apply_async(args=[checkpoint.pk], queue=worker)

    run = wait_for(
        lambda: SyncRun.objects.filter(checkpoint=checkpoint).exclude(status=SyncRun.Status.RUNNING).first(), "the sync"
    )
    assert run.status == SyncRun.Status.OK
    assert run.worker.startswith("celery@")
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True)) == [0, 1, 2, 4]
    assert Checkpoint.objects.get(pk=checkpoint.pk).sync_lease_owner == ""


def test_a_worker_builds_the_chart_rollups_of_older_history_as_it_starts(checkpoint_roots, copy_checkpoint):
    directory = copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent")
    checkpoint = make_checkpoint(url=str(directory))
    sync_checkpoint(checkpoint.pk)
    last = checkpoint.batches.get(batch_id=4)
    Batch.objects.bulk_create(  # a longer history, built in chunks of 8 batch ids: one task run each
        Batch(
            checkpoint=checkpoint,
            batch_id=b,
            offset_log_version=1,
            timestamp_ms=last.timestamp_ms + b * 1_000,
            watermark_ms=0,
        )
        for b in range(8, 40)
    )
    # As migration 0028 leaves a checkpoint whose batches were synced before roll-ups existed.
    TimelineRollup.objects.filter(checkpoint=checkpoint).delete()
    Checkpoint.objects.filter(pk=checkpoint.pk).update(timeline_rollups_built=False)
    queue = f"{queue_of_this_run()}-housekeeping"
    env = {"CKPTWEB_QUEUE_HOUSEKEEPING": queue, "CKPTWEB_ROLLUP_BUILD_CHUNK_BATCHES": "8"}

    with celery_worker(redis_url_or_skip(), checkpoint_roots, queue=queue, env=env):
        wait_for(lambda: Checkpoint.objects.filter(pk=checkpoint.pk, timeline_rollups_built=True).exists(), "the build")

    batches = list(checkpoint.batches.order_by("batch_id"))
    raw = [
        {
            "batch_id": batch.batch_id,
            "timestamp_ms": batch.timestamp_ms,
            "watermark_ms": batch.watermark_ms,
            "interval_ms": None if index == 0 else batch.timestamp_ms - batches[index - 1].timestamp_ms,
            "committed_flag": int(batch.is_committed),
        }
        for index, batch in enumerate(batches)
    ]
    assert [row["batch_id"] for row in raw] == [0, 1, 2, 4, *range(8, 40)]
    assert stored_rollups(TimelineRollup.objects.filter(checkpoint=checkpoint)) == expected_rollups(raw, TIMELINE_SHAPE)
