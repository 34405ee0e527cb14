"""A long query history written straight to the database: progress of every batch, one stateful
operator and one Kafka-like source each, with a spike of each kind (the Runtime charts must keep
them when downsampled)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from dashboards.models import BatchProgress, Checkpoint, SourceLagMetrics, StateOperatorMetrics, StreamingQuery
from dashboards.query_page.runtime_series import rebuild_runtime_rollups
from factories import make_checkpoint

START_MS = 1_700_000_000_000
RATE_SPIKE_BATCH, SLOW_BATCH, ROWS_SPIKE_BATCH, LAG_SPIKE_BATCH = 1_234, 2_345, 3_456, 4_567


def fill_progress_history(batches: int, *, name: str) -> Checkpoint:
    """``batches`` batches of progress, one operator and one source each, with a spike of each kind and two runs."""
    query = StreamingQuery.objects.create(query_id=uuid.uuid5(uuid.NAMESPACE_DNS, name))
    checkpoint = make_checkpoint(name=name, url=f"/nowhere/{name}", query=query)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_batch_id=batches - 1)
    rows = BatchProgress.objects.bulk_create(
        (
            BatchProgress(
                query=query,
                batch_id=b,
                timestamp=datetime.fromtimestamp((START_MS + b * 1000) / 1000, tz=UTC),
                origin="listener",
                input_rows_per_second=10_000.0 if b == RATE_SPIKE_BATCH else 10.0,
                processed_rows_per_second=20.0,
                num_input_rows=10,
                batch_duration_ms=90_000 if b == SLOW_BATCH else 500,
                duration_ms={"addBatch": 400, "walCommit": 100},
                watermark=datetime.fromtimestamp((START_MS + b * 1000 - 5_000) / 1000, tz=UTC),
            )
            for b in range(batches)
        ),
        batch_size=1_000,
    )
    StateOperatorMetrics.objects.bulk_create(
        (
            StateOperatorMetrics(
                progress=p,
                operator_index=0,
                operator_name="dedupe",
                num_rows_total=10**9 if p.batch_id == ROWS_SPIKE_BATCH else 5,
                num_rows_updated=1,
                num_rows_removed=0,
                num_rows_dropped_by_watermark=0,
                memory_used_bytes=1_000,
                custom_metrics={"loadedMapCacheHitCount": 9, "loadedMapCacheMissCount": 1},
            )
            for p in rows
        ),
        batch_size=1_000,
    )
    SourceLagMetrics.objects.bulk_create(
        (
            SourceLagMetrics(
                progress=p,
                source_index=0,
                description="KafkaV2[Subscribe[orders]]",
                offsets_behind=70_000 if p.batch_id == LAG_SPIKE_BATCH else 7,
                basis="kafka-metrics",
            )
            for p in rows
        ),
        batch_size=1_000,
    )
    rebuild_runtime_rollups(query.pk)  # the ingest keeps them as progress arrives; these rows skipped it
    checkpoint.refresh_from_db()
    return checkpoint
