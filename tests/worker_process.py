"""A real Celery worker process on Redis and the test database, for tests whose behaviour depends on it;
a private Redis to stop under it, and sends as celery beat makes them."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from celery import Task
from django.conf import settings
from kombu.exceptions import OperationalError

from fixture_paths import REPO_DIR
from redis_keys import RUN, queue_of_this_run

WORKER_TIMEOUT_SECONDS = 60


def redis_url_or_skip() -> str:
    """The Redis of the README's test command; a skip on the embedded SQLite leg."""
    url = os.environ.get("CKPTWEB_REDIS_URL")
    if not url:
        pytest.skip("needs CKPTWEB_REDIS_URL (the README's test command sets it)")
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        pytest.skip("a worker process cannot share the in-memory SQLite test database")
    return url


@contextlib.contextmanager
def celery_worker(
    redis_url: str,
    checkpoint_roots: Path,
    *,
    pool: str = "solo",
    env: Mapping[str, str] | None = None,
    queue: str | None = None,
    name: str = "celery",
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start `celery worker` on a queue of its own (or ``queue``, to share one), pointed at the
    test database; yield (queue, process)."""
    queue = queue or queue_of_this_run()
    database = settings.DATABASES["default"]
    worker_env = {
        **os.environ,
        "CKPTWEB_DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "CKPTWEB_REDIS_URL": redis_url,
        "CKPTWEB_CHECKPOINT_ROOTS": str(checkpoint_roots),
        # Its data folder (state key sets, the embedded broker) beside the roots, not the checkout's var/.
        "CKPTWEB_DATA_DIR": str(checkpoint_roots.parent / "var"),
        **(env or {}),
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "ckptweb",
        "worker",
        "-Q",
        queue,
        f"--pool={pool}",
        "--concurrency=1",
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
        # The run in the host part: workers of two runs (two pytest-xdist workers) on one Redis
        # must not share a node name, whose remote-control queue Celery names after it.
        f"--hostname={name}@%h.{RUN}",
    ]
    # Its output goes to a file, not a pipe: nobody reads a pipe until the worker stops, and a worker
    # logging more than the pipe holds (tracebacks while its database is down) blocks in the write.
    # A session of its own, so that the worker and its pool's children can be killed as a group.
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            command,
            cwd=REPO_DIR,
            env=worker_env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield queue, process
        finally:
            stop_worker(process)
            output.seek(0)
            print(output.read().decode(errors="replace"))  # shown by pytest when the test fails


def stop_worker(process: subprocess.Popen) -> None:
    """Stop a worker as its supervisor would (a warm shutdown), killing it and its pool's children if
    it has not ended within WORKER_TIMEOUT_SECONDS.

    A worker left running keeps its connection to the test database, which then cannot be dropped.
    """
    process.terminate()
    try:
        process.wait(timeout=WORKER_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        print(f"[killed: no warm shutdown within {WORKER_TIMEOUT_SECONDS} s]")
    _kill_group(process.pid)  # pool children left by a worker that was SIGKILLed during the test
    process.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def wait_for(predicate, what: str, *, timeout: float = WORKER_TIMEOUT_SECONDS):
    """Poll ``predicate`` until it returns something true; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    """A loopback TCP port nothing listens on now (for a server a test starts itself)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Periodically:
    """Call ``action`` at most once every ``seconds`` when asked, as celery beat sends a periodic task."""

    def __init__(self, seconds: float, action) -> None:
        self.seconds, self.action, self.last = seconds, action, None

    def __call__(self) -> None:
        if self.last is None or time.monotonic() - self.last >= self.seconds:
            self.action()
            self.last = time.monotonic()


class PrivateRedis:
    """A redis-server of the test's own on a free port (the machine's Redis serves other runs).

    It keeps nothing on disk, so once stopped and started again it is empty: a broker restarted
    without its data, every queued and unacknowledged message gone.
    """

    def __init__(self, port: int) -> None:
        self.port, self.process = port, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [
            shutil.which("redis-server"),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
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


@contextlib.contextmanager
def private_redis_server() -> Iterator[PrivateRedis]:
    """A started PrivateRedis for one test, stopped after it; a skip on the SQLite leg or without redis-server."""
    redis_url_or_skip()  # the PostgreSQL + Redis leg only
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    redis = PrivateRedis(free_port())
    redis.start()
    try:
        yield redis
    finally:
        if redis.process.poll() is None:
            redis.stop()


def send_as_beat(broker_url: str, queue: str, task: Task, *args) -> bool:
    """Send ``task(*args)`` once, as celery beat would; False (logged by beat, not raised) while the broker is down."""
    from ckptweb.celery import app

    try:
        with app.connection_for_write(broker_url) as connection:
            task.apply_async(args=args, queue=queue, connection=connection, retry=False)
        return True
    except (OperationalError, OSError):
        return False


@contextlib.contextmanager
def celery_app_sending_to(broker_url: str) -> Iterator[None]:
    """Point this process's Celery app (what the views send with) at ``broker_url`` for the block."""
    from ckptweb.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = broker_url
    app._pool = app.amqp._producer_pool = None  # both cache connections to the previous broker
    try:
        yield
    finally:
        app.conf.broker_url = previous
        app._pool = app.amqp._producer_pool = None
