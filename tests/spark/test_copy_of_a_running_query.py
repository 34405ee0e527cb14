"""A copy of a running query's checkpoint (`cp -a`), registered seconds later, as issue 28 met it.

A real PySpark query runs with ckptweb's listener posting to a live ckptweb. Its checkpoint is
copied between two batches and both are registered and synced (the original first); the live
query then commits more batches and the listener sends their progress, which names the query id
both checkpoints share. The copy must show no progress past its own newest batch anywhere (query
page, runs table, charts, read API, /metrics) and must never be running on the original's evidence.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboards.health.query_status import State
from dashboards.models import BatchProgress, Checkpoint
from dashboards.models.status_rows import STATUS_FACTS_OF_ONE, annotated_checkpoint
from dashboards.query_page.run_summary import runs_section
from factories import make_checkpoint
from pipelines.queries import FIXTURE_START_MS, RateSpec, stop_between_batches, windowed_agg_noop_query
from prometheus.scenario import checkpoint_sample, parse_exposition
from spark.live_copy import batches_done, copy_between_batches, wait_for
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

# Batches the live query commits, and reports, past the copy's newest before the pages are read.
BATCHES_PAST_THE_COPY = 3
# Long enough that a small batch on a loaded 2-core machine ends well before the next trigger,
# leaving a moment between two batches to copy the checkpoint in (a 1 s trigger ran back to back).
TRIGGER = "5 seconds"
# Synced by the test only: a slow wait must not make the copy "failing to sync" (3 intervals overdue).
HOURLY = {"sync_interval_seconds": 3600}


def test_a_copy_of_a_running_query_shows_no_progress_past_its_own_batches_and_is_never_running(
    spark, listener, checkpoint_roots, admin_client
):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    rate = RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000)
    live = (
        windowed_agg_noop_query(spark, checkpoint_roots / "live", "copied_live", rate)
        .trigger(processingTime=TRIGGER)
        .start()
    )
    try:
        wait_for(lambda: batches_done(live) >= 2, "three batches of the live query")
        copied = copy_between_batches(
            live, checkpoint_roots / "live" / "checkpoint", checkpoint_roots / "copy" / "checkpoint"
        )
        original = make_checkpoint(name="original", url=str(checkpoint_roots / "live" / "checkpoint"), **HOURLY)
        sync_checkpoint(original.pk)
        copy = make_checkpoint(name="copy", url=str(copied), **HOURLY)
        sync_checkpoint(copy.pk)
        copy.refresh_from_db()
        last_copied = copy.latest_batch_id
        assert copy.query_id == Checkpoint.objects.get(pk=original.pk).query_id
        assert _status_on_page(admin_client, copy) is State.STOPPED  # seconds after its batches: not running

        progress_of_query = BatchProgress.objects.filter(query_id=copy.query_id)
        past_the_copy = last_copied + BATCHES_PAST_THE_COPY
        wait_for(lambda: progress_of_query.filter(batch_id__gte=past_the_copy).exists(), "progress past the copy")
    finally:
        stop_between_batches(live, timeout_seconds=60)
    spark_reported = {json.loads(progress.json)["batchId"] for progress in live.recentProgress}
    copys_own = {batch_id for batch_id in spark_reported if batch_id <= last_copied}
    received = progress_of_query.filter(batch_id__lte=last_copied)
    wait_for(lambda: received.count() == len(copys_own), "the progress of every batch the copy holds")

    page = admin_client.get(copy.get_absolute_url())
    served = admin_client.get(reverse("api-progress-list", args=[copy.pk])).json()["results"]
    drawn = admin_client.get(reverse("dashboards:runtime-charts", args=[copy.pk])).json()
    samples = parse_exposition(admin_client.get("/metrics").content.decode())
    listing = admin_client.get(reverse("dashboards:checkpoint-list")).content.decode()

    assert page.context["status"].state is State.STOPPED
    assert page.context["status"].reason.startswith("a copy of original (same query id, at batch ")
    assert f"the newest is batch {last_copied}," in page.content.decode()
    # The Runs section as the page builds it (its body may come from the cache: no context then).
    runs = runs_section(annotated_checkpoint(copy.pk, STATUS_FACTS_OF_ONE)).runs
    assert max(run.last_batch_id for run in runs) == last_copied
    assert {row["batch_id"] for row in served} == copys_own
    assert max(drawn["rates"]["data"][0]["customdata"]) == last_copied
    assert checkpoint_sample(samples, "ckptweb_progress_batch_id", "copy") == last_copied
    assert checkpoint_sample(samples, "ckptweb_progress_batch_id", "original") >= past_the_copy
    assert 'data-checkpoint="copy" data-status="stopped"' in listing
    assert f"this is a copy of original taken at batch {last_copied}</div>" in listing


def _status_on_page(client, checkpoint: Checkpoint) -> State:
    return client.get(checkpoint.get_absolute_url()).context["status"].state
