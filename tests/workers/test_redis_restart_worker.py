"""Redis (the broker) stopped and started again while a worker syncs: no sync is lost for good.

A private redis-server on a port of its own (the machine's Redis serves other runs), a real worker
on it, and the test playing celery beat: it sends a sync every half second, as beat would, and
like beat it only logs a send that fails while Redis is down. New batches written during the
outage are in the rows soon after Redis is back; the figure is printed.
"""

from __future__ import annotations

import time

import pytest

from bench.checkpoint_history import read_template, write_batches
from factories import make_checkpoint
from worker_process import Periodically, celery_worker, send_as_beat, wait_for
from workers import tasks

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_syncs_resume_after_redis_restarts_and_nothing_written_meanwhile_is_missed(private_redis, checkpoint_roots):
    directory = checkpoint_roots / "q"
    write_batches(directory, range(100), read_template())
    checkpoint = make_checkpoint(name="q", url=str(directory))
    settings_env = {"CKPTWEB_SYNC_LEASE_SECONDS": "5"}

    with celery_worker(private_redis.url, checkpoint_roots, env=settings_env) as (queue, process):
        beat = Periodically(0.5, lambda: send_as_beat(private_redis.url, queue, tasks.sync_checkpoint, checkpoint.pk))

        def current(latest: int):
            beat()
            checkpoint.refresh_from_db()
            return checkpoint.latest_batch_id == latest

        wait_for(lambda: current(99), "the first sync", timeout=60)

        private_redis.stop()
        write_batches(directory, range(100, 110), read_template())
        sends_while_down = [
            send_as_beat(private_redis.url, queue, tasks.sync_checkpoint, checkpoint.pk) for _ in range(3)
        ]
        private_redis.start()
        back = time.monotonic()
        wait_for(lambda: current(109), "a sync after Redis is back", timeout=120)
        print(f"current again {time.monotonic() - back:.1f} s after Redis restarted")
        assert process.poll() is None, "the worker must survive the broker's restart"

    assert sends_while_down == [False, False, False]
    ids = list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True))
    assert ids == list(range(110))
