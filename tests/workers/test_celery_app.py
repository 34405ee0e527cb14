"""The Celery app's wiring (ckptweb/celery.py) as a task sees it."""

from __future__ import annotations

import pytest
from django.db import connection

from dashboards.models import Checkpoint
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers import tasks

pytestmark = pytest.mark.django_db


def test_a_task_starts_with_an_empty_query_log_when_debug_is_on(settings, copy_checkpoint):
    settings.DEBUG = True  # Django logs every query then, as in the demo
    checkpoint = make_checkpoint(url=str(copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint")))
    Checkpoint.objects.filter(name="asked before the task").exists()

    tasks.sync_checkpoint.apply(args=[checkpoint.pk])

    logged = [query["sql"] for query in connection.queries]
    assert any("dashboards_batch" in sql for sql in logged), "the task's own queries are logged"
    assert not any("asked before the task" in sql for sql in logged)
