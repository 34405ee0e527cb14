"""Which queue each task goes to (workers.routing through Celery's own router)."""

from __future__ import annotations

import pytest

from ckptweb.celery import app
from factories import make_checkpoint
from workers.routing import storage_scheme


def _queue_of(name: str, args: tuple = (), **options) -> str:
    return app.amqp.router.route(options, name, args, {})["queue"].name


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("workers.tasks.sync_checkpoint", "sync"),
        ("workers.tasks.count_state_rows", "state"),
        ("workers.tasks.sample_state_partition", "state"),
        ("workers.tasks.plan_maintenance", "maintenance"),
        ("workers.tasks.run_maintenance", "maintenance"),
        ("workers.tasks.run_maintenance_policy", "maintenance"),
        ("workers.tasks.tail_event_logs", "housekeeping"),
        ("workers.tasks.resume_interrupted_maintenance", "housekeeping"),
    ],
)
def test_each_task_goes_to_the_queue_of_its_kind(settings, task, kind):
    assert _queue_of(task, (1,)) == settings.TASK_QUEUES[kind]


def test_every_task_of_the_project_has_a_queue_a_plain_worker_consumes(settings):
    import workers.tasks  # noqa: F401  (registers the tasks, as a worker does at start)

    consumed = {queue.name for queue in app.amqp.queues.values()}
    project_tasks = [name for name in app.tasks if name.startswith("workers.")]
    assert len(project_tasks) >= 8
    assert {_queue_of(name, (1,)) for name in project_tasks} <= consumed


@pytest.mark.django_db
def test_syncs_go_to_the_queue_of_their_storage_scheme_when_one_is_configured(settings):
    s3 = make_checkpoint(name="on-s3", url="s3a://bucket/checkpoints/orders")
    local = make_checkpoint(name="local", url="/data/checkpoints/orders")
    settings.SYNC_QUEUES_BY_SCHEME = {"s3": "sync-s3"}

    assert _queue_of("workers.tasks.sync_checkpoint", (s3.pk,)) == "sync-s3"
    assert _queue_of("workers.tasks.sync_checkpoint", (local.pk,)) == settings.TASK_QUEUES["sync"]


def test_an_explicit_queue_wins_over_the_routes():
    assert _queue_of("workers.tasks.run_maintenance", (1,), queue="ckptweb-test-queue") == "ckptweb-test-queue"


@pytest.mark.parametrize(
    ("url", "scheme"),
    [("/data/x", "file"), ("file:///data/x", "file"), ("S3A://b/x", "s3"), ("s3://b/x", "s3"), ("abfs://c/x", "abfs")],
)
def test_storage_scheme(url, scheme):
    assert storage_scheme(url) == scheme
