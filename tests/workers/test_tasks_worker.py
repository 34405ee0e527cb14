"""A real Celery worker process, on Redis and the test database, runs the sync task."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings

from dashboards.models import Checkpoint, SyncRun
from factories import make_checkpoint
from fixture_paths import REPO_DIR, SPARK_TEST_RESOURCES
from workers import tasks

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WORKER_TIMEOUT_SECONDS = 60


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("CKPTWEB_REDIS_URL")
    if not url:
        pytest.skip("needs CKPTWEB_REDIS_URL (the README's test command sets it)")
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        pytest.skip("a worker process cannot share the in-memory SQLite test database")
    return url


@pytest.fixture
def worker(redis_url, checkpoint_roots):
    """Start `celery worker` on a queue of its own, pointed at the test database."""
    queue = f"ckptweb-test-{uuid.uuid4().hex[:8]}"
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "CKPTWEB_DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "CKPTWEB_REDIS_URL": redis_url,
        "CKPTWEB_CHECKPOINT_ROOTS": str(checkpoint_roots),
    }
    command = [sys.executable, "-m", "celery", "-A", "ckptweb", "worker", "-Q", queue, "--pool=solo", "--loglevel=INFO", "--without-mingle", "--without-gossip"]
    process = subprocess.Popen(command, cwd=REPO_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    yield queue
    process.terminate()
    output = process.communicate(timeout=30)[0].decode(errors="replace")
    print(output)  # shown by pytest when the test fails


def _wait_for(predicate, what: str):
    deadline = time.monotonic() + WORKER_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_worker_syncs_a_checkpoint_sent_through_redis(worker, copy_checkpoint):
    directory = copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent")
    checkpoint = make_checkpoint(url=str(directory))

    tasks.sync_checkpoint.apply_async(args=[checkpoint.pk], queue=worker)

    run = _wait_for(lambda: SyncRun.objects.filter(checkpoint=checkpoint).exclude(status=SyncRun.Status.RUNNING).first(), "the sync")
    assert run.status == SyncRun.Status.OK
    assert run.worker.startswith("celery@")
    assert list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True)) == [0, 1, 2, 4]
    assert Checkpoint.objects.get(pk=checkpoint.pk).sync_lease_owner == ""
