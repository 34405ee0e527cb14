"""A real Celery worker on the embedded default's broker survives what killed the one on kombu's
stock filesystem transport: a message file read before its writer finished it.
"""

from __future__ import annotations

import pytest
from kombu import Connection

from dashboards.models import SyncRun
from embedded_broker import OLDEST_NAME, broker_options
from factories import make_checkpoint
from fixture_paths import SPARK_TEST_RESOURCES
from worker_process import celery_worker, redis_url_or_skip, wait_for
from workers import tasks


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_on_the_embedded_broker_survives_a_half_written_message_and_runs_the_next_task(
    checkpoint_roots, copy_checkpoint, tmp_path
):
    redis_url_or_skip()  # the worker shares the PostgreSQL test database, as in the Redis leg
    broker_dir = tmp_path / "broker"
    options = broker_options(broker_dir)
    checkpoint = make_checkpoint(
        url=str(copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"))
    )
    worker_env = {"CKPTWEB_REDIS_URL": "", "CKPTWEB_BROKER_DIR": str(broker_dir)}
    with celery_worker("", checkpoint_roots, env=worker_env) as (queue, process):
        # kombu's stock filesystem transport dies on this file: "Unrecoverable error: JSONDecodeError".
        (broker_dir / "queue" / f"{OLDEST_NAME}_half-written.{queue}.msg").write_bytes(b'{"body": "eyJ0YXNr')
        with Connection("ckptwebfs://", transport_options=options) as connection:
            tasks.sync_checkpoint.apply_async(args=[checkpoint.pk], queue=queue, connection=connection)

        def finished_run_or_exited_worker():
            exited = process.poll() is not None
            return (
                exited or SyncRun.objects.filter(checkpoint=checkpoint).exclude(status=SyncRun.Status.RUNNING).first()
            )

        wait_for(finished_run_or_exited_worker, "the worker to run the sync sent after the half-written message")
        assert process.poll() is None, "the worker exited (its output is printed above)"
        run = SyncRun.objects.get(checkpoint=checkpoint)
    assert run.status == SyncRun.Status.OK
    assert (broker_dir / "rejected" / f"{OLDEST_NAME}_half-written.{queue}.msg").exists()
