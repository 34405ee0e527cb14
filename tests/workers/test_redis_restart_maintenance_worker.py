"""Redis (the broker) stopped and started again, empty, around a maintenance run: no run is left
queued or running, and the checkpoint ends as its plan said.

A private redis-server, a real worker on it, the test PostgreSQL. The test plays the web process
(the maintenance pages, through the test client, send to the private Redis) and celery beat
(``resume_interrupted_maintenance`` every half second; like beat it only logs a send that fails
while Redis is down).

* Executing: Redis stops while the worker executes a purge, and the worker goes on deleting while
  it is down. To have the outage fall inside the run whatever the machine's speed (a fast machine
  deletes the 23,960 files in well under a second), the test takes the run's row lock as soon as
  the run is running, so that the worker's next progress save waits in PostgreSQL (as behind a slow
  database); it stops Redis, then lets go of the lock, and the purge goes on during the outage.
* Confirmed during the outage: the confirmation is stored but its message cannot be sent (the page
  says so); once Redis is back, beat's resume task sends it a lease later.

Printed: runs left in an unknown state (target 0) and seconds from the restart to the run's end.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.urls import reverse

from dashboards.models import MaintenanceRun
from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from redis_keys import queue_of_this_run
from worker_process import (
    Periodically,
    celery_app_sending_to,
    celery_worker,
    send_as_beat,
    wait_for,
)
from workers import tasks
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.summary import summarize_checkpoint

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Four files a batch (offsets, commits, their .crc): enough that deleting them outlasts the
# worker's first progress saves (one every PROGRESS_EVERY_SECONDS), so the outage falls mid-purge.
HISTORY_BATCHES = 6000
KEEP_BATCHES = 10
BEAT_SECONDS = 0.5
OUTAGE_SECONDS = 2.0
# Longer than the outage while the run is held, so beat's resume has no reason to hand it over.
EXECUTING_LEASE_SECONDS = 15
# Short, so that beat's resume sends the lost message soon after Redis is back.
QUEUED_LEASE_SECONDS = 2
FINISH_TIMEOUT_SECONDS = 90


@pytest.fixture
def long_history(copy_checkpoint) -> Path:
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    long_stateless_history(directory, batches=HISTORY_BATCHES)
    return directory


@contextlib.contextmanager
def _worker_on(redis, checkpoint_roots: Path, settings, *, pool: str, lease_seconds: int):
    """A worker consuming one private queue for every kind of task; the pages send to it too."""
    queue = queue_of_this_run()
    settings.TASK_QUEUES = {**settings.TASK_QUEUES, "maintenance": queue}
    env = {
        "CKPTWEB_QUEUE_MAINTENANCE": queue,  # where the resume task sends the runs it hands over
        "CKPTWEB_MAINTENANCE_LEASE_SECONDS": str(lease_seconds),
    }
    with (
        celery_app_sending_to(redis.url),
        celery_worker(redis.url, checkpoint_roots, pool=pool, env=env, queue=queue) as worker,
    ):
        yield worker


def _planned_through_the_pages(client, checkpoint) -> MaintenanceRun:
    client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]),
        {"action": "purge", "keep_batches": KEEP_BATCHES},
    )
    run = MaintenanceRun.objects.get(checkpoint=checkpoint)
    run = wait_for(lambda: MaintenanceRun.objects.exclude(status="planning").filter(pk=run.pk).first(), "the plan")
    assert run.status == MaintenanceRun.Status.PLANNED, (run.plan_error, run.plan and run.plan["summary"])
    return run


def _confirm_through_the_pages(client, run: MaintenanceRun) -> list[str]:
    """Confirm; return the messages the page would show (not rendered: the page lists every planned file)."""
    url = reverse("dashboards:maintenance-confirm", args=[run.checkpoint_id, run.pk])
    response = client.post(url, {"reason": "the history is too long", "checkpoint_name": run.checkpoint.name})
    assert response.status_code == 302
    return [str(message) for message in get_messages(response.wsgi_request)]


@contextlib.contextmanager
def _progress_saves_held(run_id: int):
    """Hold the run's row lock: the worker's next UPDATE of the run (a progress save) waits for it.

    Yields the run as it stood under the lock: still running, since a backend waits on the lock.
    """
    with transaction.atomic():
        run = MaintenanceRun.objects.select_for_update().get(pk=run_id)
        wait_for(_a_backend_waits_for_a_lock, "the worker to wait on the run's row lock")
        yield run


def _a_backend_waits_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def _finished_while_beat_plays(run_id: int, beat: Periodically) -> MaintenanceRun:
    def final():
        beat()
        run = MaintenanceRun.objects.get(pk=run_id)
        return run if run.is_final else None

    return wait_for(final, f"maintenance run #{run_id} to end", timeout=FINISH_TIMEOUT_SECONDS)


def _files(directory: Path) -> set[str]:
    return {str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file()}


def _report(what: str, back: float) -> None:
    unknown = MaintenanceRun.objects.exclude(status__in=MaintenanceRun.FINAL_STATUSES).count()
    print(
        f"{what}: runs left in an unknown state {unknown}; "
        f"run ended {time.monotonic() - back:.1f} s after Redis restarted"
    )


def _assert_kept_exactly_what_the_plan_keeps(directory: Path, before: set[str], run: MaintenanceRun) -> None:
    planned = {delete.path for delete in run.maintenance_plan.deletes}
    assert len(planned) == 4 * (HISTORY_BATCHES - KEEP_BATCHES)
    assert _files(directory) == before - planned
    assert sorted(run.result["deleted"] + run.result["already_done"]) == sorted(planned)
    storage = CheckpointStorage(str(directory))
    summary = summarize_checkpoint(storage)
    kept = tuple(range(HISTORY_BATCHES - KEEP_BATCHES, HISTORY_BATCHES))
    assert (summary.offset_ids, summary.commit_ids, summary.errors) == (kept, kept, ())
    assert [f for f in check_checkpoint(storage) if f.severity == "error"] == []


def _audit_events(run: MaintenanceRun) -> list[str]:
    return list(run.audit_entries.order_by("at", "pk").values_list("event", flat=True))


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_run_executing_while_redis_restarts_empty_succeeds_and_keeps_exactly_what_its_plan_keeps(
    pool, private_redis, long_history, checkpoint_roots, oncall_client, settings
):
    checkpoint = make_checkpoint(name="orders", url=str(long_history))
    before = _files(long_history)
    planned_deletes = 4 * (HISTORY_BATCHES - KEEP_BATCHES)
    with _worker_on(private_redis, checkpoint_roots, settings, pool=pool, lease_seconds=EXECUTING_LEASE_SECONDS) as (
        queue,
        process,
    ):
        run = _planned_through_the_pages(oncall_client, checkpoint)
        _confirm_through_the_pages(oncall_client, run)
        wait_for(lambda: MaintenanceRun.objects.filter(pk=run.pk, status="running").exists(), "the purge to start")
        beat = Periodically(
            BEAT_SECONDS, lambda: send_as_beat(private_redis.url, queue, tasks.resume_interrupted_maintenance)
        )
        with _progress_saves_held(run.pk) as held:
            deleted_before_outage = len(before - _files(long_history))
            private_redis.stop()
        # The lock is let go with Redis down: the worker saves its progress and deletes on.
        sends_while_down = [
            send_as_beat(private_redis.url, queue, tasks.resume_interrupted_maintenance) for _ in range(3)
        ]
        time.sleep(OUTAGE_SECONDS)
        deleted_during_outage = len(before - _files(long_history)) - deleted_before_outage
        private_redis.start()
        back = time.monotonic()
        run = _finished_while_beat_plays(run.pk, beat)
        _report(
            f"{pool} worker, {deleted_before_outage} of {planned_deletes} planned deletes done when Redis stopped, "
            f"{deleted_during_outage} during the outage",
            back,
        )
        assert process.poll() is None, "the worker must survive the broker's restart"

    assert held.status == MaintenanceRun.Status.RUNNING, "Redis must stop while the run executes"
    assert sends_while_down == [False, False, False]
    # Where the worker was held (before its first delete, mid-purge, or at the save of "done")
    # depends on the machine's speed and is only reported; that Redis stopped while the run's task
    # executed, unacknowledged, does not.
    # One attempt: Celery 5 lets a task run on when its broker connection is lost
    # (worker_cancel_long_running_tasks_on_connection_loss is False; Celery 6 means to turn it on,
    # and then the lease hands the cancelled run to a new attempt, with a "resumed" entry).
    assert (run.status, run.error, run.attempts) == (MaintenanceRun.Status.SUCCEEDED, "", 1)
    _assert_kept_exactly_what_the_plan_keeps(long_history, before, run)
    assert _audit_events(run) == ["plan-requested", "planned", "confirmed", "started", "succeeded"]


def test_a_run_confirmed_while_redis_is_down_is_sent_by_beats_resume_task_once_redis_is_back(
    private_redis, long_history, checkpoint_roots, oncall_client, settings
):
    checkpoint = make_checkpoint(name="orders", url=str(long_history))
    before = _files(long_history)
    with _worker_on(private_redis, checkpoint_roots, settings, pool="prefork", lease_seconds=QUEUED_LEASE_SECONDS) as (
        queue,
        process,
    ):
        run = _planned_through_the_pages(oncall_client, checkpoint)
        private_redis.stop()
        messages = _confirm_through_the_pages(oncall_client, run)
        assert MaintenanceRun.objects.get(pk=run.pk).status == MaintenanceRun.Status.QUEUED
        private_redis.start()
        back = time.monotonic()
        beat = Periodically(
            BEAT_SECONDS, lambda: send_as_beat(private_redis.url, queue, tasks.resume_interrupted_maintenance)
        )
        run = _finished_while_beat_plays(run.pk, beat)
        _report("confirmed during the outage", back)
        assert process.poll() is None, "the worker must survive the broker's restart"

    assert len(messages) == 1 and "the task broker did not answer" in messages[0], messages
    assert (run.status, run.error, run.attempts) == (MaintenanceRun.Status.SUCCEEDED, "", 1)
    _assert_kept_exactly_what_the_plan_keeps(long_history, before, run)
    assert _audit_events(run) == ["plan-requested", "planned", "confirmed", "started", "succeeded"]
