"""A real Celery worker process on Redis and the test database, for tests whose behaviour depends on it."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from django.conf import settings

from fixture_paths import REPO_DIR

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
    redis_url: str, checkpoint_roots: Path, *, pool: str = "solo", env: Mapping[str, str] | None = None,
    queue: str | None = None, name: str = "celery",
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start `celery worker` on a queue of its own (or ``queue``, to share one), pointed at the
    test database; yield (queue, process)."""
    queue = queue or f"ckptweb-test-{uuid.uuid4().hex[:8]}"
    database = settings.DATABASES["default"]
    worker_env = {
        **os.environ,
        "CKPTWEB_DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "CKPTWEB_REDIS_URL": redis_url,
        "CKPTWEB_CHECKPOINT_ROOTS": str(checkpoint_roots),
        **(env or {}),
    }
    command = [
        sys.executable, "-m", "celery", "-A", "ckptweb", "worker", "-Q", queue, f"--pool={pool}",
        "--concurrency=1", "--loglevel=INFO", "--without-mingle", "--without-gossip", f"--hostname={name}@%h",
    ]
    process = subprocess.Popen(command, cwd=REPO_DIR, env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield queue, process
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode(errors="replace")
        print(output)  # shown by pytest when the test fails


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
