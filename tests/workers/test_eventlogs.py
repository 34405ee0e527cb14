"""workers.eventlogs: the event logs PySpark wrote, tailed into BatchProgress rows."""

from __future__ import annotations

import json
import shutil

import pytest

from dashboards.models import BatchProgress, EventLogDirectory, QueryRun
from fixture_paths import OUR_FIXTURES
from workers.eventlogs import tail_all_event_log_directories, tail_event_log_directory

pytestmark = pytest.mark.django_db

EVENT_LOGS = OUR_FIXTURES / "event_logs"
RUNS = ("plain", "rolling_zstd")


def _reported(run: str) -> list[dict]:
    report = json.loads((EVENT_LOGS / f"{run}-report.json").read_text())
    return report["progress"] if isinstance(report, dict) else report


@pytest.fixture
def event_log_dir(checkpoint_roots):
    """Both fixture runs' logs in one spark.eventLog.dir under the allowed root."""
    directory = checkpoint_roots / "spark-events"
    directory.mkdir()
    for run in RUNS:
        for entry in (EVENT_LOGS / run).iterdir():
            (shutil.copytree if entry.is_dir() else shutil.copy)(entry, directory / entry.name)
    return directory


def test_every_reported_batch_of_every_log_is_stored(event_log_dir):
    EventLogDirectory.objects.create(name="events", url=str(event_log_dir))

    stored = tail_all_event_log_directories()

    expected = [progress for run in RUNS for progress in _reported(run)]
    assert stored == len(expected)
    for progress in expected:
        row = BatchProgress.objects.get(query__query_id=progress["id"], batch_id=progress["batchId"])
        assert row.origin == BatchProgress.Origin.EVENT_LOG
        assert row.num_input_rows == progress["numInputRows"]
        operators = list(row.state_operators.values_list("num_rows_total", "memory_used_bytes"))
        assert operators == [(op["numRowsTotal"], op["memoryUsedBytes"]) for op in progress["stateOperators"]]
    assert QueryRun.objects.filter(started_at__isnull=False).count() == len(RUNS)


def test_a_second_tail_stores_nothing_and_reads_no_finished_log_again(event_log_dir):
    directory = EventLogDirectory.objects.create(name="events", url=str(event_log_dir))
    tail_event_log_directory(directory.pk)
    rows = BatchProgress.objects.count()

    assert tail_event_log_directory(directory.pk) == 0
    assert BatchProgress.objects.count() == rows
    directory.refresh_from_db()
    assert set(directory.positions) == {entry.name for entry in event_log_dir.iterdir()}
    assert directory.errors == {}


def test_a_damaged_log_is_reported_and_the_others_still_read(event_log_dir):
    [plain] = [entry for entry in event_log_dir.iterdir() if entry.is_file()]
    # A progress event that is no longer JSON, as a disk error could leave it.
    plain.write_bytes(plain.read_bytes().replace(b'"batchId":', b'"batchId":x', 1))
    directory = EventLogDirectory.objects.create(name="events", url=str(event_log_dir))

    stored = tail_event_log_directory(directory.pk)

    directory.refresh_from_db()
    assert list(directory.errors) == [plain.name]
    assert directory.errors[plain.name].startswith(plain.name)
    assert stored == len(_reported("rolling_zstd"))
    assert plain.name not in directory.positions


def test_a_directory_outside_the_allowed_roots_is_refused(tmp_path):
    directory = EventLogDirectory.objects.create(name="elsewhere", url=str(tmp_path))
    assert tail_event_log_directory(directory.pk) == 0
    directory.refresh_from_db()
    assert "outside the allowed roots" in directory.errors[""]


def test_celery_beat_runs_the_tail_task_periodically():
    from ckptweb.celery import app

    entry = app.conf.beat_schedule["tail-event-logs"]
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks
    assert entry["schedule"] > 0
