"""Each health state built by real PySpark queries, and the four places that show it agree on it.

Real queries on one SparkSession with the shipped listener posting to a live ckptweb: one keeps
running, one was stopped between batches, one sits idle on an empty file source (Spark 3.5+
reports that with QueryIdleEvent), one whose batches start taking longer than its trigger; beside
them Spark's checkpoint of a run killed mid-batch (tests/fixtures/killed_mid_batch), a copy of
the running query's checkpoint taken while it ran, and a folder that is no checkpoint. After a
sync of each, the list (its row), the query page (its header), /metrics
(ckptweb_checkpoint_status) and the alert rules (promtool test rules over the scraped
ckptweb_checkpoint_condition samples) must all say the state the scenario built.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dashboards.models import Checkpoint
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from pipelines.queries import (
    FIXTURE_START_MS,
    RateSpec,
    file_events,
    noop_sink,
    windowed_agg_foreach_batch_query,
    windowed_agg_noop_query,
)
from spark.live_copy import batches_done, copy_between_batches, wait_for
from workers.sync import sync_checkpoint

from .health_views import ALERT_OF_CONDITION, states_shown

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

# The floors of the quiet and stall periods in this test: short, so that a stopped query shows
# as stopped within the test; the queries' own triggers are shorter still.
QUIET_SECONDS = 12
# Triggers long enough that a small batch on a loaded 2-core machine still ends well before the
# next (so the trigger is learned, and the running query is not taken for one falling behind).
FAST_TRIGGER = "3 seconds"
RUNNING_TRIGGER = "5 seconds"
SLOW_BATCH_SECONDS = 8.0
EXPECTED = {
    "running": "running",
    "stopped": "stopped",
    "idle": "idle",
    "behind": "falling-behind",
    "killed": "stalled",
    "copy": "stopped",
    "nothing": "not-a-checkpoint",
}


@pytest.fixture
def quick_thresholds(settings):
    settings.HEALTH_STOPPED_AFTER_SECONDS = QUIET_SECONDS
    settings.HEALTH_STALLED_AFTER_SECONDS = QUIET_SECONDS


def test_the_list_the_query_page_metrics_and_alerts_agree_on_each_state_spark_leaves(
    spark, listener, checkpoint_roots, copy_checkpoint, quick_thresholds, admin_client, promtool, tmp_path
):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "1000")
    rate = RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000)
    queries: list = []
    try:
        # Stopped between two batches for sure: availableNow runs the three files there are, commits
        # each batch, and ends by itself (stopping a running query may land inside a batch).
        for number in range(3):
            _write_event_file(checkpoint_roots / "stopped" / "input", number)
        stopped = (
            noop_sink(
                file_events(spark, checkpoint_roots / "stopped" / "input"),
                checkpoint_roots / "stopped",
                "health_stopped",
            )
            .trigger(availableNow=True)
            .start()
        )
        queries.append(stopped)
        assert stopped.awaitTermination(240), "the availableNow query did not end within 240 s"

        slow = threading.Event()

        def count_then_maybe_wait(frame, batch_id: int) -> None:
            frame.count()  # every partition is read, so Spark commits every state store
            if slow.is_set():
                time.sleep(SLOW_BATCH_SECONDS)

        behind = (
            windowed_agg_foreach_batch_query(
                spark, checkpoint_roots / "behind", "health_behind", rate, count_then_maybe_wait
            )
            .trigger(processingTime=FAST_TRIGGER)
            .start()
        )
        running = (
            windowed_agg_noop_query(spark, checkpoint_roots / "running", "health_running", rate)
            .trigger(processingTime=RUNNING_TRIGGER)
            .start()
        )
        _write_event_file(checkpoint_roots / "idle" / "input", 0)
        idle = (
            noop_sink(file_events(spark, checkpoint_roots / "idle" / "input"), checkpoint_roots / "idle", "health_idle")
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        queries += [behind, running, idle]

        checkpoints = {
            name: make_checkpoint(name=name, url=str(checkpoint_roots / name / "checkpoint"), sync_interval_seconds=5)
            for name in ("stopped", "running", "idle")
        }
        # The trigger is given, as a platform team would for a query it knows: on a loaded machine
        # even the fast batches may not end early enough for the trigger to be learned from them
        # (learn_trigger_interval has its own tests).
        checkpoints["behind"] = make_checkpoint(
            name="behind",
            url=str(checkpoint_roots / "behind" / "checkpoint"),
            sync_interval_seconds=5,
            expected_trigger_seconds=3,
        )
        checkpoints["killed"] = make_checkpoint(
            name="killed", url=str(copy_checkpoint(OUR_FIXTURES / "killed_mid_batch" / "checkpoint", "killed"))
        )
        (checkpoint_roots / "nothing").mkdir()
        (checkpoint_roots / "nothing" / "notes.txt").write_text("not a checkpoint\n")
        checkpoints["nothing"] = make_checkpoint(name="nothing", url=str(checkpoint_roots / "nothing"))

        # A few batches on time, then every batch takes longer than the trigger.
        wait_for(lambda: batches_done(behind) >= 2, "three batches on time")
        slow.set()
        copied = copy_between_batches(
            running, checkpoint_roots / "running" / "checkpoint", checkpoint_roots / "copy" / "checkpoint"
        )
        checkpoints["copy"] = make_checkpoint(name="copy", url=str(copied))
        slow_from = batches_done(behind) + 2
        wait_for(lambda: batches_done(behind) >= slow_from + 7, "eight batches slower than the trigger", timeout=300)
        wait_for(lambda: _copy_is_quiet(copied), "the copy's quiet period")

        for checkpoint in checkpoints.values():
            sync_checkpoint(checkpoint.pk)
        shown = states_shown(admin_client, checkpoints, promtool, tmp_path)
    finally:
        for query in queries:
            if query.isActive:
                query.stop()

    figures = {
        c.name: (
            c.trigger_interval_ms,
            c.typical_gap_ms,
            c.recent_batch_duration_ms,
            c.recent_input_rate,
            c.recent_process_rate,
        )
        for c in Checkpoint.objects.all()
    }
    for name, expected in EXPECTED.items():
        assert shown[name] == {
            "list": expected,
            "header": expected,
            "metrics": expected,
            "alerts": shown[name]["alerts"],
        }, (name, figures[name])
        expected_alert = ALERT_OF_CONDITION.get(expected)
        if expected_alert:
            assert expected_alert in shown[name]["alerts"], (name, shown[name]["alerts"])


def _write_event_file(folder: Path, number: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{number}.json").write_text(
        f'{{"id": "e{number}", "event_time": "2024-01-01T00:00:0{number}Z", "value": {number}}}\n'
    )


def _copy_is_quiet(copied: Path) -> bool:
    newest = max(path.stat().st_mtime for path in (copied / "offsets").iterdir())
    return time.time() - newest > QUIET_SECONDS + 2
