"""End to end: a real PySpark query with the ckptweb listener, posting to a running ckptweb.

The query writes a checkpoint under the allowed root; ckptweb's live server takes the progress
through /api/ingest/progress/ with a token; a sync of the checkpoint then meets the progress on
the same (query id, batch id), and the batch page shows Spark's own figures.
"""

from __future__ import annotations

import json

import pytest

from dashboards.models import BatchProgress
from factories import make_checkpoint
from pipelines.progress_listener import CkptwebProgressListener
from pipelines.queries import FIXTURE_START_MS, RateSpec, stop_between_batches, windowed_agg_noop_query
from spark.live_copy import batches_done, wait_for
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

BATCHES = 4


def test_progress_of_a_running_query_reaches_ckptweb_and_meets_its_batches(
    spark, live_server, pipeline_token, checkpoint_roots, tmp_path
):
    listener = CkptwebProgressListener(live_server.url, pipeline_token, spool_dir=tmp_path / "spool")
    spark.streams.addListener(listener)
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    rate = RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000)
    query = (
        windowed_agg_noop_query(spark, checkpoint_roots / "agg", "listener_e2e", rate)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: batches_done(query) >= BATCHES - 1, "batches", timeout=180)
    finally:
        stop_between_batches(query, timeout_seconds=60)
    reported = [json.loads(progress.json) for progress in query.recentProgress]
    # Spark's listener bus delivers events asynchronously: the last ones may still be on their way.
    progress_of_query = BatchProgress.objects.filter(query__query_id=str(query.id))
    wait_for(lambda: progress_of_query.count() == len(reported), "every batch's progress in ckptweb", timeout=60)
    spark.streams.removeListener(listener)
    assert listener.close(timeout_seconds=60), "the listener did not send or spool its queue within 60 s"

    rows = list(BatchProgress.objects.filter(query__query_id=str(query.id)).order_by("batch_id"))
    assert [row.batch_id for row in rows] == [p["batchId"] for p in reported]
    assert [row.num_input_rows for row in rows] == [p["numInputRows"] for p in reported]
    assert [row.state_operators.get().num_rows_total for row in rows] == [
        p["stateOperators"][0]["numRowsTotal"] for p in reported
    ]
    assert listener.stats()["sent"] == len(reported)

    checkpoint = make_checkpoint(url=str(checkpoint_roots / "agg" / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert str(checkpoint.query.query_id) == str(query.id)
    assert checkpoint.latest_committed_batch_id == reported[-1]["batchId"]
