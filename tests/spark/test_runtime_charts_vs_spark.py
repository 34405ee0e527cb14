"""The Runtime charts against Spark's own progress: a real query run three times over one checkpoint (two
restarts, file source and sink logs compacting every 2 batches), its progress reaching ckptweb once
through the shipped listener posting to a live server, and once only through Spark's event log.

Each time every chart must draw, for every batch, what ``query.recentProgress`` reported, and every
chart must mark the restarts where the run id changed and the compactions where Spark wrote a
``.compact`` file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.core.cache import cache
from django.urls import reverse

from dashboards.models import BatchProgress, EventLogDirectory, QueryRun
from factories import make_checkpoint
from fixture_paths import REPO_DIR
from runtime_expectations import assert_drawn_as_reported, epoch_ms, marks_of
from workers.checkpoint.layout import parse_batch_id
from workers.eventlogs import tail_event_log_directory
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

RUNS = 3
PIPELINE_TIMEOUT_SECONDS = 900


@pytest.fixture
def spark_run(live_server, pipeline_token, checkpoint_roots) -> dict:
    """Run tests/spark/runtime_pipeline.py against the live server; its report, with the paths it wrote."""
    base, event_logs, report = (
        checkpoint_roots / "dedup",
        checkpoint_roots / "spark-events",
        checkpoint_roots / "report.json",
    )
    event_logs.mkdir()
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), str(REPO_DIR / "tests")])}
    command = [
        sys.executable,
        "-m",
        "spark.runtime_pipeline",
        str(base),
        str(event_logs),
        live_server.url,
        pipeline_token,
        str(report),
        "--runs",
        str(RUNS),
    ]
    finished = subprocess.run(
        command, cwd=REPO_DIR, env=environment, capture_output=True, text=True, timeout=PIPELINE_TIMEOUT_SECONDS
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    return {**json.loads(report.read_text()), "base": base, "event_logs": event_logs}


def _restarts(progress: list[dict]) -> list[tuple[int, int]]:
    """(time, batch) of each batch whose run id differs from the batch before it."""
    return [
        (epoch_ms(p["timestamp"]), p["batchId"])
        for before, p in zip(progress, progress[1:], strict=False)
        if p["runId"] != before["runId"]
    ]


def _compactions(base, progress: list[dict]) -> list[tuple[int, int]]:
    """(time, batch) of each compaction Spark wrote: _spark_metadata/N.compact (the sink's batch N), and
    sources/0/L.compact (the batch whose offset in offsets/N reached logOffset L)."""
    times = {p["batchId"]: epoch_ms(p["timestamp"]) for p in progress}
    sink = {
        parse_batch_id(path.name, compactible=True) for path in (base / "output" / "_spark_metadata").glob("*.compact")
    }
    source_compactions = {
        parse_batch_id(path.name, compactible=True)
        for path in (base / "checkpoint" / "sources" / "0").glob("*.compact")
    }
    reached, previous = set(), None
    for batch in sorted(times):
        log_offset = json.loads((base / "checkpoint" / "offsets" / str(batch)).read_text().splitlines()[-1])[
            "logOffset"
        ]
        if log_offset != previous and log_offset in source_compactions:
            reached.add(batch)
        previous = log_offset
    assert sink and reached, "Spark compacted neither log: the run was too short"
    return sorted((times[batch], batch) for batch in sink | reached)


def _check_charts(client, checkpoint, run: dict) -> None:
    progress = run["progress"]
    response = client.get(reverse("dashboards:runtime-charts", args=[checkpoint.pk]))
    assert response.status_code == 200
    figures = response.json()

    assert_drawn_as_reported(figures, progress)
    restarts, compactions = _restarts(progress), _compactions(run["base"], progress)
    assert len(restarts) == RUNS - 1
    drawn = {part: figure for part, figure in figures.items() if "sentence" not in figure["layout"]["meta"]}
    assert set(figures) - set(drawn) == {"behind-head"}  # Spark's rate source reports no latestOffset
    for part, figure in drawn.items():
        marks = marks_of(figure)
        assert [(time, batch) for time, _, batch in marks["query restart"]] == restarts, part
        assert [(time, batch) for time, _, batch in marks["log compaction"]] == compactions, part
        assert "pinned SQL conf changed" not in marks, part  # Spark restores the pinned conf on a restart


def test_the_runtime_charts_draw_what_spark_reported_from_the_listener_and_from_the_event_log(
    spark_run, viewer_client, checkpoint_roots
):
    progress = spark_run["progress"]
    assert spark_run["listener"]["sent"] == len(progress) and spark_run["listener_closed"]
    checkpoint = make_checkpoint(
        name="dedup", url=str(spark_run["base"] / "checkpoint"), sink_log_url=str(spark_run["base"] / "output")
    )
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert str(checkpoint.query.query_id) == spark_run["query_id"]

    # 1. What the listener posted to the live server while the query ran.
    reported = BatchProgress.objects.filter(query=checkpoint.query)
    assert sorted(reported.values_list("batch_id", flat=True)) == [p["batchId"] for p in progress]
    assert set(reported.values_list("origin", flat=True)) == {BatchProgress.Origin.LISTENER}
    _check_charts(viewer_client, checkpoint, spark_run)

    # 2. The same history known only from Spark's event log.
    reported.delete()
    QueryRun.objects.filter(query=checkpoint.query).delete()
    cache.clear()
    directory = EventLogDirectory.objects.create(name="spark-events", url=str(spark_run["event_logs"]))
    assert tail_event_log_directory(directory.pk) == len(progress)
    assert set(reported.values_list("origin", flat=True)) == {BatchProgress.Origin.EVENT_LOG}
    _check_charts(viewer_client, checkpoint, spark_run)
