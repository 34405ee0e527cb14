"""A worker SIGKILLed in the middle of a long sync: nothing is lost, nothing stored twice, and the
run it left is marked failed by the sync that takes over once its lease has expired."""

from __future__ import annotations

import os
import signal

import pytest

from bench.checkpoint_history import read_template, write_batches
from dashboards.models import Batch, SyncRun
from factories import make_checkpoint
from worker_process import Periodically, celery_worker, redis_url_or_skip, wait_for
from workers import tasks

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

BATCHES = 30_000
LEASE_SECONDS = 3


def test_a_sync_killed_between_chunks_is_finished_by_the_next_one(checkpoint_roots, settings):
    redis_url = redis_url_or_skip()
    directory = checkpoint_roots / "long"
    write_batches(directory, range(BATCHES), read_template())
    write_batches(directory, range(BATCHES, BATCHES + 2), read_template(), committed=False)
    checkpoint = make_checkpoint(name="long", url=str(directory))
    env = {"CKPTWEB_SYNC_LEASE_SECONDS": str(LEASE_SECONDS)}

    with celery_worker(redis_url, checkpoint_roots, env=env) as (queue, process):
        tasks.sync_checkpoint.apply_async(args=[checkpoint.pk], queue=queue)
        # Killed once the first chunk of the reconcile is stored and before the last one is.
        wait_for(lambda: Batch.objects.filter(checkpoint=checkpoint).exists(), "the first chunk", timeout=120)
        os.kill(process.pid, signal.SIGKILL)
    stored_by_the_dead_worker = Batch.objects.filter(checkpoint=checkpoint).count()
    assert 0 < stored_by_the_dead_worker < BATCHES
    assert SyncRun.objects.get(checkpoint=checkpoint).status == SyncRun.Status.RUNNING

    settings.SYNC_LEASE_SECONDS = LEASE_SECONDS
    with celery_worker(redis_url, checkpoint_roots, env=env) as (queue, _):
        # Periodic syncs, as beat sends them (here every second): those that come while the dead
        # worker's lease holds are skipped; the first after it expires takes over.
        beat = Periodically(1, lambda: tasks.sync_checkpoint.apply_async(args=[checkpoint.pk], queue=queue))

        def sync_again():
            beat()
            return SyncRun.objects.filter(checkpoint=checkpoint, status=SyncRun.Status.OK).first()

        finished = wait_for(sync_again, "a sync after the lease expired", timeout=180)

    ids = list(Batch.objects.filter(checkpoint=checkpoint).order_by("batch_id").values_list("batch_id", flat=True))
    assert ids == list(range(BATCHES + 2))
    assert finished.new_batches == BATCHES + 2 - stored_by_the_dead_worker
    dead = SyncRun.objects.filter(checkpoint=checkpoint).order_by("started_at").first()
    assert dead.status == SyncRun.Status.FAILED and "worker stopped" in dead.message
    checkpoint.refresh_from_db()
    assert (checkpoint.latest_batch_id, checkpoint.latest_committed_batch_id, checkpoint.uncommitted_batch_count) == (
        BATCHES + 1,
        BATCHES - 1,
        2,
    )
