"""A full pass over 1,000 state partitions fans out to two real Celery workers and joins.

Redis and PostgreSQL, as the README's test command runs them; skipped on the SQLite leg.
"""

from __future__ import annotations

import contextlib

import pytest

from bench.checkpoint_history import TEMPLATE_CHECKPOINT as WINDOWED_AGG
from bench.checkpoint_history import write_state_partitions
from dashboards.models import StatePartition, StateScan, StateScanChunk
from factories import make_checkpoint
from redis_keys import queue_of_this_run
from worker_process import celery_worker, redis_url_or_skip, wait_for
from workers import tasks
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db(transaction=True)

PARTITIONS = 1000
CHUNK = 50


def test_a_thousand_partitions_are_counted_by_two_workers_and_joined(copy_checkpoint, checkpoint_roots, settings):
    redis_url = redis_url_or_skip()
    # The rows of the partitions Spark wrote, counted in one pass in this process.
    settings.STATE_FANOUT_PARTITIONS = 0
    reference = make_checkpoint(name="reference", url=str(copy_checkpoint(WINDOWED_AGG, "reference")))
    sync_checkpoint(reference.pk)
    expected = dict(StatePartition.objects.filter(checkpoint=reference).values_list("partition", "rows"))
    assert expected and None not in expected.values()

    directory = copy_checkpoint(WINDOWED_AGG, "wide")
    sources = write_state_partitions(directory, PARTITIONS)
    checkpoint = make_checkpoint(name="wide", url=str(directory))
    state_queue = queue_of_this_run("state-")
    env = {
        "CKPTWEB_STATE_FANOUT_PARTITIONS": "64",
        "CKPTWEB_STATE_FANOUT_CHUNK_PARTITIONS": str(CHUNK),
        "CKPTWEB_QUEUE_STATE": state_queue,
    }
    with contextlib.ExitStack() as workers:
        # One worker takes the sync; the chunks it queues go to the state queue, which two others consume.
        sync_queue, _ = workers.enter_context(celery_worker(redis_url, checkpoint_roots, env=env, name="sync"))
        for name in ("second", "third"):
            workers.enter_context(celery_worker(redis_url, checkpoint_roots, env=env, queue=state_queue, name=name))
        tasks.sync_checkpoint.apply_async(args=[checkpoint.pk], queue=sync_queue)

        scan = wait_for(
            lambda: StateScan.objects.filter(checkpoint=checkpoint, finished_at__isnull=False).first(),
            "the scan's last chunk to join",
            timeout=300,
        )

    assert (scan.partitions, scan.chunks, scan.chunks_done, scan.error_count) == (
        PARTITIONS,
        PARTITIONS // CHUNK,
        PARTITIONS // CHUNK,
        0,
    )
    rows = dict(StatePartition.objects.filter(checkpoint=checkpoint).values_list("partition", "rows"))
    assert rows == {partition: expected[source] for partition, source in sources.items()}
    workers_used = set(StateScanChunk.objects.filter(scan=scan).values_list("worker", flat=True))
    assert {name.split("@")[0] for name in workers_used} == {"second", "third"}
    assert scan.list_calls >= PARTITIONS
