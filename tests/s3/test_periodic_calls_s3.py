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

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.utils import timezone

from bench.checkpoint_history import read_template
from dashboards.models import Checkpoint, MetadataLog, StatePartition
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.state_partitions import VERSION_FIGURES
from workers.sync import sync_checkpoint

from .conftest import BUCKET

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup" / "checkpoint"
SINK_LOG = OUR_FIXTURES / "windowed_agg_file_sink" / "output" / "_spark_metadata"
PARTITIONS = (0, 1)
COMPACT_INTERVAL = 3
SNAPSHOT_EVERY = 10
RETAINED_VERSIONS = 100
SYNC_EVERY = timedelta(seconds=10)
COUNTED_KINDS = ("LIST", "GET", "HEAD")
# What the state panel shows of a partition: its files' figures, then its rows.
STATE_FIGURES = (*VERSION_FIGURES, "rows", "rows_version")
LOG_FIGURES = ("path", "latest_batch_id", "live_entries", "latest_compact_bytes")


class GrowingQuery:
    """Writes one checkpoint's files on S3 as the query's batches run."""

    def __init__(self, client, prefix: str) -> None:
        self.client, self.prefix = client, prefix
        template = read_template(DEDUP)
        self.offsets, self.commits, self.metadata = template.offsets, template.commits, template.metadata
        # A delta whose puts are all in the snapshot: replaying it on the snapshot gives the snapshot's rows.
        self.delta = (DEDUP / "state" / "0" / "0" / "16.delta").read_bytes()
        self.snapshot = (DEDUP / "state" / "0" / "0" / "16.snapshot").read_bytes()
        self.source_entry, self.source_compact = (
            (DEDUP / "sources" / "0" / n).read_bytes() for n in ("7", "5.compact")
        )
        self.sink_entry, self.sink_compact = ((SINK_LOG / n).read_bytes() for n in ("10", "11.compact"))

    def start(self, batches: int) -> None:
        """The query's first ``batches`` batches, and its state as maintenance left it."""
        files = {"checkpoint/metadata": self.metadata, "checkpoint/state/0/_metadata/metadata": self._schema()}
        for batch_id in range(batches):
            files.update(self._log_files(batch_id))
        for version in range(max(1, batches + 1 - RETAINED_VERSIONS), batches + 1):
            files.update(self._state_files(version))
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(lambda item: self._put(*item), files.items()))

    def run_batch(self, batch_id: int) -> None:
        """Batch ``batch_id`` runs: its logs and state version, then maintenance deletes the oldest version."""
        for key, body in {**self._log_files(batch_id), **self._state_files(batch_id + 1)}.items():
            self._put(key, body)
        oldest = batch_id + 1 - RETAINED_VERSIONS
        for partition in PARTITIONS:
            for suffix in ("delta", "snapshot"):
                self.client.delete_object(Bucket=BUCKET, Key=f"{self.prefix}/{_store(partition)}/{oldest}.{suffix}")

    def _log_files(self, batch_id: int) -> dict[str, bytes]:
        compact = (batch_id + 1) % COMPACT_INTERVAL == 0
        name = f"{batch_id}.compact" if compact else str(batch_id)
        return {
            f"checkpoint/offsets/{batch_id}": self.offsets,
            f"checkpoint/commits/{batch_id}": self.commits,
            f"checkpoint/sources/0/{name}": self.source_compact if compact else self.source_entry,
            f"output/_spark_metadata/{name}": self.sink_compact if compact else self.sink_entry,
        }

    def _state_files(self, version: int) -> dict[str, bytes]:
        files = {}
        for partition in PARTITIONS:
            files[f"{_store(partition)}/{version}.delta"] = self.delta
            if version % SNAPSHOT_EVERY == 0:
                files[f"{_store(partition)}/{version}.snapshot"] = self.snapshot
        return files

    def _schema(self) -> bytes:
        return (DEDUP / "state" / "0" / "_metadata" / "metadata").read_bytes()

    def _put(self, key: str, body: bytes) -> None:
        self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}", Body=body)


def _store(partition: int) -> str:
    return f"checkpoint/state/0/{partition}"


def _register(client, prefix: str, batches: int) -> tuple[Checkpoint, GrowingQuery]:
    query = GrowingQuery(client, prefix)
    query.start(batches)
    checkpoint = make_checkpoint(
        name=prefix,
        url=f"s3://{BUCKET}/{prefix}/checkpoint",
        sink_log_url=f"s3://{BUCKET}/{prefix}/output",
        sync_interval_seconds=int(SYNC_EVERY.total_seconds()),
    )
    return checkpoint, query


def _count_100_syncs(moto_server, checkpoint: Checkpoint, query: GrowingQuery, first_batch: int, start) -> dict:
    moto_server.reset_counts()
    for step in range(1, 101):
        query.run_batch(first_batch + step - 1)
        # The test's own writes are PUT and DELETE requests, not counted.
        run = sync_checkpoint(checkpoint.pk, now=start + step * SYNC_EVERY)
        assert run.status == run.Status.OK, run.message
    return {kind: moto_server.requests_by_kind[kind] for kind in COUNTED_KINDS}


def _history(moto_server, s3_bucket, prefix: str, batches: int) -> tuple[dict, Checkpoint, GrowingQuery]:
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


def _figures(checkpoint: Checkpoint) -> tuple[list, list]:
    state = StatePartition.objects.filter(checkpoint=checkpoint).order_by("partition")
    logs = MetadataLog.objects.filter(checkpoint=checkpoint).order_by("path")
    return list(state.values_list(*STATE_FIGURES)), list(logs.values_list(*LOG_FIGURES))


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
    followed = _figures(checkpoint)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(full_walk_requested_at=timezone.now())
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert checkpoint.full_walk_requested_at is None
    walked = _figures(checkpoint)
    assert followed == walked
    assert [row[:3] for row in walked[0]] == [(1301, 1202, 1300)] * 2, "versions up to 1,201 were deleted"
