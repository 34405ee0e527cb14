"""A real Celery worker process, on Redis and the test database, runs the sync task."""

from __future__ import annotations

import pytest

from dashboards.models import Checkpoint, SyncRun
from factories import make_checkpoint
from fixture_paths import SPARK_TEST_RESOURCES
from worker_process import celery_worker, redis_url_or_skip, wait_for
from workers import tasks

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
