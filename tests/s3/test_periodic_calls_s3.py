"""Steady-state storage calls do not grow with the history (issue 25, "periodic storage work costs
what is new"): 100 syncs, each after one new batch, cost the same LIST, GET and HEAD requests on
moto's S3 server whether the checkpoint has 150 or 1,200 batches behind it, with the full-walk
schedule and the probe between walks at their defaults; and what the probes followed equals what
a full walk finds afterwards.

The checkpoint grows as a file-source query with dropDuplicates and a file sink grows, each file a
copy of one PySpark wrote (tests/fixtures/file_source_dedup, windowed_agg_file_sink): per batch
offsets/N, commits/N, the source log's and the sink log's batch file (``N.compact`` every 3rd, their
interval), and each state partition's ``<N+1>.delta``. State maintenance is placed as Spark's does
it, deterministically: a snapshot every 10 versions, and versions older than the newest 100 deleted
(spark.sql.streaming.minBatchesToRetain); offsets and commits are kept whole, the longest history.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from bench.growing_checkpoint import GrowingCheckpoint
from bench.periodic_calls import followed_figures
from dashboards.models import Checkpoint
from factories import make_checkpoint
from workers.sync import sync_checkpoint

from .conftest import BUCKET

pytestmark = pytest.mark.django_db

PARTITIONS = 2
COMPACT_INTERVAL = 3
SNAPSHOT_EVERY = 10
RETAINED_VERSIONS = 100
SYNC_EVERY = timedelta(seconds=10)
COUNTED_KINDS = ("LIST", "GET", "HEAD")


def _register(client, prefix: str, batches: int) -> tuple[Checkpoint, GrowingCheckpoint]:
    query = GrowingCheckpoint(
        client,
        BUCKET,
        prefix,
        partitions=PARTITIONS,
        compact_interval=COMPACT_INTERVAL,
        snapshot_every=SNAPSHOT_EVERY,
        retained_versions=RETAINED_VERSIONS,
    )
    query.start(batches)
    checkpoint = make_checkpoint(
        name=prefix,
        url=f"s3://{BUCKET}/{prefix}/checkpoint",
        sink_log_url=f"s3://{BUCKET}/{prefix}/output",
        sync_interval_seconds=int(SYNC_EVERY.total_seconds()),
    )
    return checkpoint, query


def _count_100_syncs(moto_server, checkpoint: Checkpoint, query: GrowingCheckpoint, first_batch: int, start) -> dict:
    moto_server.reset_counts()
    for step in range(1, 101):
        query.run_batch(first_batch + step - 1)
        # The test's own writes are PUT and DELETE requests, not counted.
        run = sync_checkpoint(checkpoint.pk, now=start + step * SYNC_EVERY)
        assert run.status == run.Status.OK, run.message
    return {kind: moto_server.requests_by_kind[kind] for kind in COUNTED_KINDS}


def _history(moto_server, s3_bucket, prefix: str, batches: int) -> tuple[dict, Checkpoint, GrowingCheckpoint]:
    checkpoint, query = _register(s3_bucket, prefix, batches)
    start = timezone.now()
    sync_checkpoint(checkpoint.pk, now=start)  # registration: the full walk, and the reconcile
    checkpoint.refresh_from_db()
    walked_at = checkpoint.last_inspected_at
    counts = _count_100_syncs(moto_server, checkpoint, query, batches, start)
    checkpoint.refresh_from_db()
    assert checkpoint.latest_batch_id == batches + 99
    assert checkpoint.last_inspected_at == walked_at, "no full walk between the registration and the schedule's"
    assert checkpoint.last_probed_at > walked_at, "the probe between walks ran"
    return counts, checkpoint, query


def test_100_syncs_cost_the_same_calls_at_150_and_1200_batches_and_follow_what_a_full_walk_finds(
    moto_server, s3_bucket, state_keys_dir
):
    short, _, _ = _history(moto_server, s3_bucket, "short", 150)
    long, checkpoint, query = _history(moto_server, s3_bucket, "long", 1200)

    assert short == long, (short, long)
    assert long["HEAD"] > 0 and long["GET"] > 200, long  # the probes and the new files were read

    # One more batch, synced when the state follow (CKPTWEB_STATE_FOLLOW_MIN_SECONDS) and the probe
    # are both due, so that the figures they follow are of the newest batch.
    query.run_batch(1300)
    sync_checkpoint(checkpoint.pk, now=checkpoint.last_synced_at + timedelta(seconds=400))
    followed = followed_figures(checkpoint.pk)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(full_walk_requested_at=timezone.now())
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert checkpoint.full_walk_requested_at is None
    walked = followed_figures(checkpoint.pk)
    assert followed == walked
    assert [row[:3] for row in walked[0]] == [(1301, 1202, 1300)] * 2, "versions up to 1,201 were deleted"
