"""Redis (the broker) stopped and started again while a worker syncs: no sync is lost for good.

A private redis-server on a port of its own (the machine's Redis serves other runs), a real worker
on it, and the test playing celery beat: it sends a sync every half second, as beat would, and
like beat it only logs a send that fails while Redis is down. New batches written during the
outage are in the rows soon after Redis is back; the figure is printed.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
from kombu.exceptions import OperationalError

from bench.checkpoint_history import read_template, write_batches
from ckptweb.celery import app
from factories import make_checkpoint
from worker_process import Periodically, celery_worker, free_port, redis_url_or_skip, wait_for
from workers import tasks

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class PrivateRedis:
    def __init__(self, port: int) -> None:
        self.port, self.process = port, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, "redis-server to accept connections", timeout=20)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False


@pytest.fixture
def private_redis():
    redis_url_or_skip()  # the PostgreSQL + Redis leg only
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    redis = PrivateRedis(free_port())
    redis.start()
    yield redis
    if redis.process.poll() is None:
        redis.stop()


def _beat_sends_sync(broker_url: str, queue: str, checkpoint_id: int) -> bool:
    """Send one sync as beat would; False (logged, not raised) while the broker is down."""
    try:
        with app.connection_for_write(broker_url) as connection:
            tasks.sync_checkpoint.apply_async(args=[checkpoint_id], queue=queue, connection=connection, retry=False)
        return True
    except (OperationalError, OSError):
        return False


def test_syncs_resume_after_redis_restarts_and_nothing_written_meanwhile_is_missed(private_redis, checkpoint_roots):
    directory = checkpoint_roots / "q"
    write_batches(directory, range(100), read_template())
    checkpoint = make_checkpoint(name="q", url=str(directory))
    settings_env = {"CKPTWEB_SYNC_LEASE_SECONDS": "5"}

    with celery_worker(private_redis.url, checkpoint_roots, env=settings_env) as (queue, process):
        beat = Periodically(0.5, lambda: _beat_sends_sync(private_redis.url, queue, checkpoint.pk))

        def current(latest: int):
            beat()
            checkpoint.refresh_from_db()
            return checkpoint.latest_batch_id == latest

        wait_for(lambda: current(99), "the first sync", timeout=60)

        private_redis.stop()
        write_batches(directory, range(100, 110), read_template())
        sends_while_down = [_beat_sends_sync(private_redis.url, queue, checkpoint.pk) for _ in range(3)]
        private_redis.start()
        back = time.monotonic()
        wait_for(lambda: current(109), "a sync after Redis is back", timeout=120)
        print(f"current again {time.monotonic() - back:.1f} s after Redis restarted")
        assert process.poll() is None, "the worker must survive the broker's restart"

    assert sends_while_down == [False, False, False]
    ids = list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True))
    assert ids == list(range(110))
